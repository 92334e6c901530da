"""Run a run again from the monitor: resume a stopped run, fork a run at one of its steps.

Both are htmx POSTs (a plain form post works too). Done, the page goes to the run's monitor
(`HX-Redirect`: a resumed run's page follows it live from there); refused, the form shows why.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from runner.models import Run
from runner.reruns import RerunInvalid, RunNotResumable, run_fork, run_resume
from runner.selectors import run_get

from ..forms.reruns import ForkForm, ResumeForm
from .runs import HtmxHttpRequest

ERRORS = "runs/_rerun_errors.html"


@login_required
@require_POST
def run_resume_view(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """Queue a failed or cancelled run again at the step it stopped at."""
    run = run_get(user=request.user, run_id=run_id)
    form = ResumeForm(request.POST)
    if not form.is_valid():
        return _refused(request, run, _form_errors(form), 400)
    try:
        run_resume(
            run=run,
            version=form.cleaned_data["version"],
            actor=form.cleaned_data["actor"] or None,
        )
    except RerunInvalid as exc:
        return _refused(request, run, exc.errors, 400)
    except RunNotResumable as exc:
        return _refused(request, run, [str(exc)], 409)
    messages.success(request, f"Run #{run.pk} is queued again at the step it stopped at.")
    return _go_to(request, run)


@login_required
@require_POST
def run_fork_view(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """Start a new run from one of the run's steps, with that step's answer edited or not."""
    run = run_get(user=request.user, run_id=run_id)
    form = ForkForm(request.POST)
    if not form.is_valid():
        return _refused(request, run, _form_errors(form), 400)
    at_seq = form.cleaned_data["at_seq"]
    try:
        fork = run_fork(user=request.user, run=run, at_seq=at_seq, response=form.answer())
    except RerunInvalid as exc:
        return _refused(request, run, exc.errors, 400)
    messages.success(request, f"Run #{fork.pk} is a fork of run #{run.pk} at step {at_seq}.")
    return _go_to(request, fork)


def _form_errors(form: ResumeForm | ForkForm) -> list[str]:
    """Return the form's errors as `field: message`, as the API words them."""
    return [f"{name}: {error}" for name, errors in form.errors.items() for error in errors]


def _refused(request: HtmxHttpRequest, run: Run, errors: list[str], status: int) -> HttpResponse:
    """Say why: in the form that asked (htmx), else on the run's monitor."""
    if request.htmx:
        return render(request, ERRORS, {"errors": errors}, status=status)
    for error in errors:
        messages.error(request, error)
    return redirect("run-monitor", run_id=run.pk)


def _go_to(request: HtmxHttpRequest, run: Run) -> HttpResponse:
    """Open the run's monitor: a new page, which follows the run live."""
    monitor = reverse("run-monitor", args=[run.pk])
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = monitor
        return response
    return redirect(monitor)
