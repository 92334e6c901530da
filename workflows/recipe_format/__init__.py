from .loading import DocumentError, load_document, structure_errors
from .schema import FORMAT, json_schema

__all__ = ["FORMAT", "DocumentError", "json_schema", "load_document", "structure_errors"]
