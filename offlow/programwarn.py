"""What a program is warned of wherever it runs, before it runs: `offlow run` (with the
run's own warnings beside: offlow.runner.warn), a session, and `offlow reload` of a new
build into a running program (offlow.reload)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from offlow.races import lost_updates
from offlow.unchosen import unchosen_outputs

if TYPE_CHECKING:
    from offlow.build import Build


def program_warnings(b: Build) -> list[str]:
    """The C compiler's warnings at the program's own lines (its build's, cached or
    not), shared arrays whose plain updates run on several threads at once, elements
    whose bodies may choose no output."""
    return [*b.warnings, *lost_updates(b.plan), *unchosen_outputs(b.plan.graph)]
