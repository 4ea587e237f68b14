"""The languages an agent serves: their tags, which one each customer message is in, and the
session's language that every engine-written line and every reply follows."""
