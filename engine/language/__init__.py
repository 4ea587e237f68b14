"""The languages an agent serves: their tags, which one each customer message is in, the
session's language that every engine-written line and every reply follows, and the catalogs of
those lines (`lines`, `catalogs/`)."""
