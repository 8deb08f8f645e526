"""A workload managed by an upstream VPA object on the dashboard: what it says, the
Adopt button, the conflict warning, and a policy edit refused until adopted."""

from __future__ import annotations

from django.urls import reverse

from recommender.models import AuditEvent, Policy
from tests.factories import make_cluster, make_workload
from tests.web.conftest import client_for


def mirrored(mode="Recreate"):
    cluster = make_cluster()
    workload = make_workload(cluster, "web")
    Policy.objects.filter(workload=workload).update(
        source=Policy.Source.VPA_OBJECT,
        mode=mode,
        vpa_object="shop/web-vpa",
        vpa_object_mode=mode,
    )
    return workload, make_workload(cluster, "db")


def page_of(user, workload):
    return (
        client_for(user).get(reverse("workload", args=[workload.pk])).content.decode()
    )


def test_a_mirrored_workload_says_which_object_manages_it(viewer):
    workload, own = mirrored()

    page = page_of(viewer, workload)

    assert "Managed by VerticalPodAutoscaler shop/web-vpa (mode Recreate)" in page
    assert "never acts on this workload" in page
    assert 'data-testid="adopt-form"' not in page  # viewers cannot adopt
    assert 'data-testid="policy-source"' not in page_of(viewer, own)


def test_an_operator_adopts_a_workload_and_sees_the_conflict(operator):
    workload, _ = mirrored()
    client = client_for(operator)
    page = client.get(reverse("workload", args=[workload.pk])).content.decode()
    assert 'data-testid="adopt-form"' in page
    assert 'id="policy-form"' not in page  # no editing until adopted

    answer = client.post(reverse("workload_adopt", args=[workload.pk]), follow=True)

    page = answer.content.decode()
    assert "Adopted: vpaweb&#x27;s policy now, mode Off." in page
    policy = Policy.objects.get(workload=workload)
    assert (policy.source, policy.mode) == ("vpaweb", "Off")
    assert AuditEvent.objects.filter(action="policy.adopt", actor=operator).exists()
    # The object still acts in Recreate: the page warns, and the form is back.
    assert 'data-testid="vpa-conflict"' in page
    assert 'data-testid="vpa-conflict-badge"' in page
    assert "still targets this workload in mode <strong>Recreate</strong>" in page
    assert 'id="policy-form"' in page


def test_adopting_again_says_why_not(operator):
    _, own = mirrored()

    answer = client_for(operator).post(
        reverse("workload_adopt", args=[own.pk]), follow=True
    )

    assert "already vpaweb&#x27;s own" in answer.content.decode()
    assert not AuditEvent.objects.exists()


def test_adopting_needs_an_operator_and_a_post(viewer, operator):
    workload, _ = mirrored()
    url = reverse("workload_adopt", args=[workload.pk])

    assert client_for(viewer).post(url).status_code == 403
    assert client_for(operator).get(url).status_code == 405
    assert (
        client_for(operator).post(reverse("workload_adopt", args=[99999])).status_code
        == 404
    )
    assert Policy.objects.get(workload=workload).source == "vpa-object"


def test_a_policy_post_on_a_mirrored_workload_is_refused_and_says_adopt(operator):
    workload, _ = mirrored(mode="Off")

    answer = client_for(operator).post(
        reverse("workload_policy", args=[workload.pk]),
        {
            "mode": "Off",
            "profile": "peak-memory",
            "cp0-mode": "Auto",
            "cp0-controlled_cpu": "on",
            "cp0-controlled_memory": "on",
            "cp1-mode": "Auto",
            "cp1-controlled_cpu": "on",
            "cp1-controlled_memory": "on",
        },
        HTTP_HX_REQUEST="true",
    )

    body = answer.content.decode()
    assert answer.context["form"].errors == {
        "__all__": [
            "the policy of default/Deployment/web is managed by VerticalPodAutoscaler "
            "shop/web-vpa (mode Off); vpaweb does not change or act on it. Adopt the "
            "workload first (it becomes vpaweb's, in mode Off)"
        ]
    }
    assert "managed by VerticalPodAutoscaler shop/web-vpa" in body
    assert Policy.objects.get(workload=workload).profile == "vpa"


def test_the_workload_list_marks_mirrored_and_conflicting_workloads(viewer, operator):
    workload, _ = mirrored()
    page = client_for(viewer).get(reverse("workloads")).content.decode()
    assert page.count('data-testid="managed-by-vpa"') == 1
    assert "Managed by VerticalPodAutoscaler shop/web-vpa" in page

    client_for(operator).post(reverse("workload_adopt", args=[workload.pk]))

    page = client_for(viewer).get(reverse("workloads")).content.decode()
    assert 'data-testid="managed-by-vpa"' not in page
    assert page.count('data-testid="vpa-conflict-badge"') == 1


def test_a_mirrored_policy_says_upstream_vpa_acts_not_vpaweb(viewer):
    workload, own = mirrored(mode="Initial")
    client = client_for(viewer)

    policy = client.get(f"/api/v1/workloads/{workload.pk}/policy").json()
    page = page_of(viewer, workload)

    explained = policy["mode_consequence"]
    assert "VerticalPodAutoscaler shop/web-vpa (mode Initial)" in explained
    assert "upstream VPA's own components" in explained
    assert "vpaweb never does" in explained
    assert "admission webhook when they are created" not in explained
    assert "New pods are created as submitted" in page
    # vpaweb's own policy in Initial keeps the webhook's explanation.
    Policy.objects.filter(workload=own).update(mode="Initial")
    own_policy = client.get(f"/api/v1/workloads/{own.pk}/policy").json()
    assert "vpaweb's admission webhook" in own_policy["mode_consequence"]
