"""The monitor's forms that run a run again: resume it, fork it at a step."""

from __future__ import annotations

from django import forms

# What an answer given to a fork's first step may hold (the API's bound).
MAX_ANSWER_LENGTH = 200_000


class ResumeForm(forms.Form):
    """Resume a stopped run: on its own version and actor unless others are chosen."""

    version = forms.IntegerField(required=False, min_value=1, max_value=2**31 - 1)
    actor = forms.CharField(required=False, max_length=100)


class ForkForm(forms.Form):
    """Fork a run at a step: run the step again, or record it with the answer written."""

    ANSWER, RUN = "answer", "run"

    at_seq = forms.IntegerField(min_value=1, max_value=2**31 - 1)
    mode = forms.ChoiceField(choices=[(ANSWER, "with this answer"), (RUN, "run it again")])
    response = forms.CharField(required=False, strip=False, max_length=MAX_ANSWER_LENGTH)

    def answer(self) -> str | None:
        """Return the answer to record the step with, or None to run the step again."""
        if self.cleaned_data["mode"] == self.ANSWER:
            return str(self.cleaned_data["response"])
        return None
