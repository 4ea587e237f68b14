"""What a model is told to judge guidelines by: the shared rules and each batch kind's rules
with a few short worked examples (our own words; docs/prompts.md says which decision each line
serves). Pure text: `engine.matching.guidelines.build_match_prompt` lays it out.

The group titles are the markers a reader of the prompt keys on (the offline model's parser in
`infra/offline/matching.py` maps them to kinds), so they change only together with it.
"""

from __future__ import annotations

# Who the model is while it judges: the agent itself. Guidelines are written to the agent ("when
# you have offered a refund…"), so a model addressed as "you" and told to judge "the agent" would
# read a condition's "you" as itself and "the agent" as a third party; framed as the agent, both
# mean the same one.
ROLE = """\
You are the customer-service agent described below, about to write your next reply. First \
decide which of your guidelines apply to it. In a guideline, "you" and "the agent" both mean \
you; the "Agent:" lines below are what you said, and the customer's "you" means you and your \
business."""

# How to read any guideline, whatever its kind.
SHARED_RULES = """\
How to judge any guideline:
- Words the glossary defines mean what the glossary says, even where everyday usage differs; \
read past typos and shorthand.
- Facts about the customer, once established (earlier messages, known facts, tool results), \
keep holding whatever the current topic, until the customer says otherwise.
- A request or problem stays live while the customer pursues it, also through a related \
sub-issue; it lapses when the topic changes, when the customer sets it aside, or when the \
conversation has moved past that stage.
- Something raised and withdrawn in the same message ("my card is lost... no, found it") is not \
live.
- A condition about what you are about to do ("you are about to quote a price", "the agent \
recommends a product") holds only when the reply you must give now, to the latest message, does \
that: not because this reply could, nor because you did it earlier. One about what you did \
("you offered a refund") is judged on the conversation so far."""

# How long a rationale is: as long as its decision needs. A fixed cap ("a few words") starved the
# decisions that turn on evidence, while the many plainly unrelated guidelines of a large batch
# need only a few words: the cost stays with the decisions that need it.
RATIONALE_RULE = """\
Write each rationale before its verdict, as long as that decision needs: a few words for a \
guideline plainly unrelated to the conversation; the evidence that settles it (a sentence or \
two) for one that turns on what was said, done or implied."""
RATIONALE_SHAPE = "<the deciding evidence>"
RATIONALE_EXPLAIN = "<explain your reasoning in full, for a person reading the trace>"

# Titles of the groups, one per kind (markers: see the module docstring).
OBSERVATIONAL_TITLE = "Observations"
ACTIONABLE_TITLE = "Actions not yet taken"
PREVIOUSLY_APPLIED_TITLE = "Actions already taken"
CUSTOMER_DEPENDENT_TITLE = "Waiting for the customer"

OBSERVATIONAL_RULES = """\
Is the condition true of the conversation as it stands? Judge the whole conversation, not only \
the last message: a stated fact keeps holding; a request holds while it is live. It must be \
said or shown, in any words (by the customer, a tool result, a known fact): what is only \
likely, or what a question suggests about the customer, does not hold.
Example: "I'm a student" early on, a question about prices now → "the customer is a student" \
holds.
Example: "what would a mortgage on a flat cost me?" → "the customer owns a home" does not hold: \
nothing says they do.
Example: the baggage allowance asked and answered, now asking to pick a seat → "the customer \
asks about baggage" no longer holds."""

ACTIONABLE_RULES = """\
Should you carry out the action in your next reply? Yes when the condition is true now: of the \
latest message, or of an inquiry still in progress. A guideline that matched before but whose \
action you never carried out is judged as if it had not been seen. A standing request of the \
customer ("answer in German", "call me Ms Reyes") applies to every reply while it stands.
Example: "my flight was cancelled" / "which flight?" / "BA117, and do I get a hotel?" → "the \
customer's flight was cancelled" applies: the same inquiry goes on.
Example: "how much luggage can I take?" / "23 kg" / "ok, can I pick a seat?" → the luggage \
guideline no longer applies: the topic moved on."""

DISAMBIGUATION_RULES = """\
Use everything the customer said so far, not only the last message: an option the conversation \
already ruled in or out settles it. Offer only the options that really fit.
Example: "there's a problem with my order" → a late, a damaged and a wrong item all fit: \
ambiguous, ask which.
Example: "my parcel arrived crushed" → only the damaged item fits: not ambiguous."""

PREVIOUSLY_APPLIED_RULES = """\
You already carried out these actions earlier in this conversation. Apply one again only when \
its condition arose anew after you acted: a recurring situation on each new occurrence (a \
second order to track), a one-time behaviour (a greeting, a disclaimer) only if its condition \
lapsed and clearly came back, a situation that grew worse, a request the customer presses again \
because what you did did not settle it. A condition that is merely still true is not enough: \
the same matter, unchanged and still under discussion, or a fact that keeps holding, was served \
by what you did. An action done only in part (one of two questions asked) is not yet carried \
out: it applies.
Example: the status of one booking given, now "and my return flight?" → "check a booking" \
applies again.
Example: fees explained, now "ok, and is that per month?" → "explain the fees" does not: the \
same question goes on, answer it without repeating the action.
Example: greeted at the start, the customer says "thanks" mid-way → the greeting does not."""

CUSTOMER_DEPENDENT_RULES = """\
You did your part and wait for the customer. condition_holds: the matter is still live (a \
topic switch in the same message cancels it). customer_completed: the customer has given what \
you asked, for the matter you asked it for. new_context: the same need arose for another \
matter (a second account needs its own number): you ask again, whether or not they answered \
for the first. Settled static facts (a name, a birth date) are not asked again without a new \
context.
Example: asked for the booking reference, the customer answers "it's QX7-22" → completed.
Example: the reference given, now "I have a second booking to change too" → new_context.
Example: asked for the booking reference, the customer says "forget it, is there wifi on \
board?" → the condition no longer holds."""


def count_text(count: int) -> str:
    """The number a model must answer for, stated outright: "Exactly 3 guidelines (g1–g3) are
    listed"."""
    if count == 1:
        return "Exactly 1 guideline (g1) is listed"
    return f"Exactly {count} guidelines (g1–g{count}) are listed"
