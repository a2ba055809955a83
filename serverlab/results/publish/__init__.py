"""``serverlab publish``: a static results site, its JSON under ``results.schema.json``."""

from serverlab.results.publish.site import SCHEMA_PATH, SCHEMA_VERSION, PublishedSite, publish

__all__ = ["SCHEMA_PATH", "SCHEMA_VERSION", "PublishedSite", "publish"]
