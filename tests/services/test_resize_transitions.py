"""One way a resize change's status changes: ``ResizeChange.swap_status`` in
recommender/models/actuation.py, refusing any move ``RESIZE_TRANSITIONS`` does not list.
No other module of recommender writes a ResizeChange's status (a static check)."""

from __future__ import annotations

import ast
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

import recommender
from recommender.models import RESIZE_TRANSITIONS, ResizeChange
from tests.factories import make_cluster, make_workload

SOURCE = Path(recommender.__file__).parent
MODEL = Path("models/actuation.py")
S = ResizeChange.Status
SQL_UPDATE = re.compile(r"\bUPDATE\s+\W?recommender_resizechange\b", re.IGNORECASE)
NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def _names_status(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == "status"


def status_writes(source: Path) -> list[str]:
    """``path:line`` of every status write outside the model's module, in modules that
    name ResizeChange: an ``update()`` or ``bulk_update()`` given ``status=`` (or a
    ``**dict`` built with a "status" key), a ``save()`` or ``bulk_update()`` whose
    fields list "status", an assignment to ``.status``, an SQL ``UPDATE`` of the
    table."""
    found = []
    for path in sorted(source.rglob("*.py")):
        relative = path.relative_to(source)
        text = path.read_text()
        if relative == MODEL or relative.parts[0] == "migrations":
            continue
        if "ResizeChange" not in text and "resizechange" not in text.lower():
            continue
        tree = ast.parse(text, str(path))
        # Names bound to a dict literal with a "status" key: ``update(**values)``.
        status_dicts = {
            target.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Dict)
            and any(key is not None and _names_status(key) for key in node.value.keys)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(tree):
            line = f"{relative}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                method = node.func.attr
                for keyword in node.keywords:
                    if method in ("update", "bulk_update") and (
                        keyword.arg == "status"
                        or (
                            keyword.arg is None
                            and isinstance(keyword.value, ast.Name)
                            and keyword.value.id in status_dicts
                        )
                    ):
                        found.append(line)
                    if method in ("save", "bulk_update") and any(
                        _names_status(item) for item in ast.walk(keyword.value)
                    ):
                        found.append(line)
                if method == "bulk_update" and any(
                    _names_status(item) for arg in node.args for item in ast.walk(arg)
                ):
                    found.append(line)
            elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                targets = (
                    node.targets if isinstance(node, ast.Assign) else [node.target]
                )
                if any(
                    isinstance(t, ast.Attribute) and t.attr == "status" for t in targets
                ):
                    found.append(line)
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and SQL_UPDATE.search(node.value)
            ):
                found.append(line)
    return sorted(set(found))


def test_only_the_model_writes_a_resize_changes_status():
    assert status_writes(SOURCE) == []


def test_the_check_finds_status_writes_elsewhere(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "actuation.py").write_text(
        "ResizeChange.objects.filter(pk=1).update(status='applied')\n"
    )
    (tmp_path / "services").mkdir()
    (tmp_path / "services" / "withdrawal.py").write_text(
        "from recommender.models import ResizeChange\n"
        "ResizeChange.objects.filter(pk=1).update(status='rejected')\n"
        "values = {'status': 'applied', 'error': ''}\n"
        "rows.update(**values)\n"
        "change.status = 'failed'\n"
        "change.save(update_fields=['status'])\n"
        "ResizeChange.objects.bulk_update(changes, ['status'])\n"
        "cursor.execute('UPDATE recommender_resizechange SET status = %s')\n"
        "rows.update(**fields)\n"
        "rows.update(error='', observed={})\n"
        "audit(before={'status': 'approved'})\n"
    )
    # A module that never names ResizeChange writes other models' statuses.
    (tmp_path / "services" / "runs.py").write_text(
        "RefreshRun.objects.filter(pk=1).update(status='failed')\n"
    )
    assert status_writes(tmp_path) == [
        f"services/withdrawal.py:{line}" for line in (2, 4, 5, 6, 7, 8)
    ]


def _change(status: str) -> ResizeChange:
    return ResizeChange.objects.create(
        workload=make_workload(make_cluster(), "api"), pod="api-1", status=status
    )


def test_every_status_but_proposed_is_reached_from_an_open_one():
    assert set(RESIZE_TRANSITIONS) == set(S.values)
    for to, allowed in RESIZE_TRANSITIONS.items():
        assert allowed <= set(ResizeChange.OPEN_STATUSES), to
        assert to not in allowed, to


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("found", "to"),
    [
        (S.APPLIED, S.APPROVED),  # a finished change never opens again
        (S.REJECTED, S.APPROVED),
        (S.PROPOSED, S.APPLYING),  # the updater applies only approved changes
        (S.PROPOSED, S.APPLIED),
        (S.APPROVED, S.FAILED),  # only a write that was tried fails
    ],
)
def test_an_illegal_transition_is_refused_and_changes_nothing(found, to):
    change = _change(found)

    with pytest.raises(ValueError, match=f"cannot go from {found} to {to}"):
        change.swap_status(to=to, allowed_from=(found,), updated_at=NOW)

    change.refresh_from_db()
    assert change.status == found


@pytest.mark.django_db
def test_a_legal_move_wins_once_and_stores_its_fields():
    change = _change(S.APPROVED)
    other = ResizeChange.objects.get(pk=change.pk)  # a second worker's copy

    assert change.swap_status(to=S.APPLYING, allowed_from=(S.APPROVED,), attempts=1)
    assert not other.swap_status(to=S.APPLYING, allowed_from=(S.APPROVED,), attempts=2)

    assert (change.status, change.attempts) == (S.APPLYING, 1)
    assert (other.status, other.attempts) == (S.APPROVED, 0)  # the loser's copy
    change.refresh_from_db()
    assert (change.status, change.attempts) == (S.APPLYING, 1)


@pytest.mark.django_db
def test_the_status_is_only_set_through_to():
    change = _change(S.PROPOSED)

    with pytest.raises(ValueError, match="pass to="):
        change.swap_status(to=S.APPROVED, allowed_from=(S.PROPOSED,), status=S.APPLIED)
