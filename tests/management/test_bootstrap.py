"""`manage.py bootstrap` follows VPAWEB_SIMULATION both ways (review finding 21)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from recommender.models import Cluster
from recommender.roles import Role
from tests.factories import make_cluster, make_user, make_workload

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path


def bootstrap() -> str:
    out = StringIO()
    call_command("bootstrap", "--no-refresh", stdout=out)
    return out.getvalue()


def test_simulation_off_disables_the_simulated_cluster_made_earlier(settings):
    settings.SIMULATION_ENABLED = True
    assert "created the simulated cluster" in bootstrap()
    assert Cluster.objects.get(name="simulated").is_enabled

    settings.SIMULATION_ENABLED = False
    assert "disabled the simulated cluster" in bootstrap()
    assert not Cluster.objects.get(name="simulated").is_enabled

    settings.SIMULATION_ENABLED = True
    assert "enabled the simulated cluster" in bootstrap()
    assert Cluster.objects.get(name="simulated").is_enabled


def test_simulation_off_creates_nothing_and_leaves_real_clusters_alone(settings):
    settings.SIMULATION_ENABLED = False
    make_cluster("prod", kind=Cluster.Kind.KUBERNETES)

    bootstrap()

    assert list(Cluster.objects.values_list("name", "is_enabled")) == [("prod", True)]


def test_workloads_of_a_disabled_cluster_are_not_listed(settings):
    live = make_workload(make_cluster("prod"), "checkout")
    hidden = make_workload(make_cluster("simulated"), "sim-only")
    Cluster.objects.filter(pk=hidden.cluster_id).update(is_enabled=False)
    client = Client()
    client.force_login(make_user("vera", Role.VIEWER))

    page = client.get("/workloads/").content.decode()
    overview = client.get("/").content.decode()
    api = client.get("/api/v1/workloads/").json()
    export = json.loads(
        client.get("/api/v1/recommendations/export?format=json").getvalue()
    )

    assert live.name in page and hidden.name not in page
    assert '<option value="simulated"' not in page
    assert hidden.name not in overview
    assert [w["name"] for w in api["results"]] == [live.name]
    assert {row["workload"] for row in export} == {live.name}
