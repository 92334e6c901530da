"""The editor's forms, one module per concern.

`recipe` (new recipe, import, settings, publish), `step`, `branch`, `condition` (the branch's
condition builder), `testrun` (dry runs and recipe tests); `document` holds what the side-panel
forms share about the document they edit, `fields` the JSON fields and text clean-up.

The side-panel forms edit the document the page holds (recipe format v1): each one is bound to
the posted form fields plus the current document, and on success returns the new piece of the
document. Meaning is checked by the same code that checks a save (`check_document`), and its
`path: message` errors are shown beside the field they name.
"""
