"""Knowledge bases: documents converted, chunked and indexed, searched by recipe steps."""
