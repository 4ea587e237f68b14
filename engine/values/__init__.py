"""Reading values: their types, the customer's words read as those types, and where each value a
tool runs on came from. One set of rules, used by the action gate and stated in the prompts."""

from engine.values.money import Money as Money
from engine.values.types import ValueKind as ValueKind
from engine.values.types import ValueShape as ValueShape
from engine.values.types import coerce as coerce
from engine.values.types import show as show
