"""One way a resize change's status changes: ``ResizeChange.transition`` in
recommender/models/actuation.py (a compare-and-swap with its audit event), refusing any
move ``RESIZE_TRANSITIONS`` does not give to its caller. No other code of recommender
writes a ResizeChange's status (a static check), and only approvals, the withdrawal
and the updater's workflow call it."""

from __future__ import annotations

import ast
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

import recommender
from recommender.models import RESIZE_TRANSITIONS, AuditEvent, ResizeChange
from recommender.models.actuation import OPERATOR, UPDATER
from tests.factories import make_cluster, make_workload

SOURCE = Path(recommender.__file__).parent
MODEL = Path("models/actuation.py")
# The one function that writes the status, inside MODEL.
WRITER = "transition"
# The modules that move a change: the operators' decisions, Off's withdrawal and the
# updater's workflow.
CALLERS = {
    Path("services/actuation/approvals.py"),
    Path("services/policy/withdrawal.py"),
    Path("services/actuation/workflow.py"),
}
S = ResizeChange.Status
SQL_UPDATE = re.compile(r"\bUPDATE\s+\W?recommender_resizechange\b", re.IGNORECASE)
NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def _names_status(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == "status"


def _drop_the_writer(tree: ast.Module) -> None:
    """Empty ``ResizeChange.transition`` in the model's tree: its writes are allowed."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "ResizeChange":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == WRITER:
                    item.body = [ast.Pass()]


def transition_callers(source: Path) -> list[str]:
    """``path:line`` of every call of ``.transition(`` (or of the old
    ``.swap_status(``) outside ``CALLERS``."""
    found = []
    for path in sorted(source.rglob("*.py")):
        relative = path.relative_to(source)
        if relative in CALLERS or relative.parts[0] == "migrations":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in (WRITER, "swap_status")
                and any(k.arg in ("allowed_from", "to") for k in node.keywords)
            ):
                found.append(f"{relative}:{node.lineno}")
    return found


def status_writes(source: Path) -> list[str]:
    """``path:line`` of every status write outside ``ResizeChange.transition``, in
    modules that name ResizeChange: an ``update()`` or ``bulk_update()`` given
    ``status=`` (or a ``**dict`` built with a "status" key), a ``save()`` or
    ``bulk_update()`` whose fields list "status", an assignment to ``.status``, an
    SQL ``UPDATE`` of the table."""
    found = []
    for path in sorted(source.rglob("*.py")):
        relative = path.relative_to(source)
        text = path.read_text()
        if relative.parts[0] == "migrations":
            continue
        if "ResizeChange" not in text and "resizechange" not in text.lower():
            continue
        tree = ast.parse(text, str(path))
        if relative == MODEL:
            _drop_the_writer(tree)
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


def test_only_the_models_transition_writes_a_resize_changes_status():
    assert status_writes(SOURCE) == []


def test_only_approvals_withdrawal_and_the_updater_call_the_transition():
    assert transition_callers(SOURCE) == []


def test_the_check_finds_other_callers_of_the_transition(tmp_path):
    (tmp_path / "services" / "actuation").mkdir(parents=True)
    (tmp_path / "services" / "actuation" / "workflow.py").write_text(
        "change.transition(to='applying', allowed_from=('approved',), by='updater')\n"
    )
    (tmp_path / "services" / "actuation" / "cycle.py").write_text(
        "change.transition(to='applied', allowed_from=('applying',), by='updater')\n"
        "change.swap_status(to='failed', allowed_from=('applying',))\n"
        "workflow.try_transition(change, to='failed', allowed_from=('applying',))\n"
        "node.transition()\n"
    )
    assert transition_callers(tmp_path) == [
        "services/actuation/cycle.py:1",
        "services/actuation/cycle.py:2",
    ]


def test_the_check_finds_status_writes_elsewhere(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "actuation.py").write_text(
        "class ResizeChange:\n"
        "    def transition(self):\n"
        "        ResizeChange.objects.filter(pk=1).update(status='applied')\n"
        "        self.status = 'applied'\n"
        "    def close(self):\n"
        "        ResizeChange.objects.filter(pk=1).update(status='expired')\n"
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
        "models/actuation.py:6",
        *(f"services/withdrawal.py:{line}" for line in (2, 4, 5, 6, 7, 8)),
    ]


def _change(status: str) -> ResizeChange:
    return ResizeChange.objects.create(
        workload=make_workload(make_cluster(), "api"), pod="api-1", status=status
    )


def test_every_status_but_proposed_is_reached_from_an_open_one_by_its_mover():
    assert {to for _, to in RESIZE_TRANSITIONS} == set(S.values)
    for (found, to), by in RESIZE_TRANSITIONS.items():
        assert found in ResizeChange.OPEN_STATUSES and found != to, (found, to)
        assert by in (OPERATOR, UPDATER), (found, to)
    # An operator decides; the updater never approves or rejects.
    assert {move for move, by in RESIZE_TRANSITIONS.items() if by == OPERATOR} == {
        (S.PROPOSED, S.APPROVED),
        (S.PROPOSED, S.REJECTED),
        (S.APPROVED, S.REJECTED),
    }


def _move(change: ResizeChange, to: str, found: str, by: str, **fields: object):
    return change.transition(
        to=to,
        allowed_from=(found,),
        by=by,
        now=NOW,
        action=AuditEvent.Action.CHANGE_APPLY,
        message=f"{found} to {to}",
        actor_label=by,
        **fields,
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("found", "to", "by"),
    [
        (S.APPLIED, S.APPROVED, OPERATOR),  # a finished change never opens again
        (S.REJECTED, S.APPROVED, OPERATOR),
        (S.PROPOSED, S.APPLYING, UPDATER),  # the updater applies only approved changes
        (S.PROPOSED, S.APPLIED, UPDATER),
        (S.APPROVED, S.FAILED, UPDATER),  # only a write that was tried fails
        (S.PROPOSED, S.APPROVED, UPDATER),  # an operator approves, not the updater
        (S.APPLYING, S.APPLIED, OPERATOR),  # the updater verifies, not an operator
    ],
)
def test_an_illegal_transition_is_refused_and_changes_nothing(found, to, by):
    change = _change(found)

    with pytest.raises(ValueError, match=f"cannot go from {found} to {to} by the {by}"):
        _move(change, to, found, by, updated_at=NOW)

    change.refresh_from_db()
    assert change.status == found
    assert not AuditEvent.objects.exists()


@pytest.mark.django_db
def test_a_legal_move_wins_once_and_stores_its_fields_and_one_audit_event():
    change = _change(S.APPROVED)
    other = ResizeChange.objects.get(pk=change.pk)  # a second worker's copy

    assert _move(change, S.APPLYING, S.APPROVED, UPDATER, attempts=1)
    assert not _move(other, S.APPLYING, S.APPROVED, UPDATER, attempts=2)

    assert (change.status, change.attempts) == (S.APPLYING, 1)
    assert (other.status, other.attempts) == (S.APPROVED, 0)  # the loser's copy
    change.refresh_from_db()
    assert (change.status, change.attempts) == (S.APPLYING, 1)
    event = AuditEvent.objects.get()
    assert (event.before, event.after, event.message, event.object_id) == (
        {"status": S.APPROVED},
        {"status": S.APPLYING},
        "approved to applying",
        str(change.pk),
    )


@pytest.mark.django_db
def test_the_status_is_only_set_through_to():
    change = _change(S.PROPOSED)

    with pytest.raises(ValueError, match="pass to="):
        _move(change, S.APPROVED, S.PROPOSED, OPERATOR, status=S.APPLIED)
