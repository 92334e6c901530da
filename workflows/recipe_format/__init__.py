from .loading import (
    DocumentError,
    document_size_errors,
    load_document,
    structure_errors,
)
from .schema import FORMAT, json_schema

__all__ = [
    "FORMAT",
    "DocumentError",
    "document_size_errors",
    "json_schema",
    "load_document",
    "structure_errors",
]
