"""The workload page says whether the updater acts in the workload's mode, from
``Policy.in_acting_mode`` (the same ``ACTING_MODES`` the updater's filter uses)."""

from __future__ import annotations

import pytest

from recommender.models import Policy
from tests.factories import make_cluster, make_workload

M = Policy.Mode


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        (M.RECREATE, "The updater proposes one when a pod's requests leave"),
        (M.IN_PLACE_OR_RECREATE, "The updater proposes one when a pod's requests"),
        (M.IN_PLACE, "The updater proposes one when a pod's requests"),
        (M.INITIAL, "In mode Initial the updater proposes nothing."),
        (M.OFF, "In mode Off the updater proposes nothing."),
    ],
)
def test_the_changes_panel_says_whether_the_updater_acts(viewer_client, mode, said):
    workload = make_workload(make_cluster(), "api", mode=mode)

    body = viewer_client.get(f"/workloads/{workload.pk}/").content.decode()

    assert said in body


@pytest.mark.parametrize("mode", M.values)
def test_in_acting_mode_is_the_updaters_modes(mode):
    acts = Policy(mode=mode).in_acting_mode
    assert acts == (mode in (M.RECREATE, M.IN_PLACE_OR_RECREATE, M.IN_PLACE))
