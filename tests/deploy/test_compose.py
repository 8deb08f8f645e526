"""docker-compose.yml's structure (started for real by `make test-deploy`): the start
order by health, one image for every vpaweb role, secrets from an env file, the
database on a named volume, Prometheus only in its profile."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
VPAWEB = ("migrate", "web", "worker", "beat")


def test_every_vpaweb_role_is_the_same_image_chosen_by_command():
    assert {SERVICES[name]["image"] for name in VPAWEB} == {
        "${VPAWEB_IMAGE:-vpaweb:local}"
    }
    assert [SERVICES[name]["command"][0] for name in VPAWEB] == list(VPAWEB)
    for name in VPAWEB:
        service = SERVICES[name]
        assert service["read_only"] is True
        assert service["env_file"] == "${VPAWEB_ENV_FILE:-deploy/compose/demo.env}"


def test_services_start_in_order_of_health():
    assert SERVICES["migrate"]["depends_on"] == {
        "postgres": {"condition": "service_healthy"}
    }
    for name in ("web", "worker", "beat"):
        assert SERVICES[name]["depends_on"] == {
            "migrate": {"condition": "service_completed_successfully"},
            "redis": {"condition": "service_healthy"},
        }
    for name in ("postgres", "redis", "web", "worker"):
        assert SERVICES[name]["healthcheck"]["test"], name


def test_the_database_is_on_a_named_volume_and_prometheus_is_optional():
    assert "postgres-data:/var/lib/postgresql/data" in SERVICES["postgres"]["volumes"]
    assert "postgres-data" in COMPOSE["volumes"]
    assert SERVICES["prometheus"]["profiles"] == ["metrics"]
    assert all("profiles" not in SERVICES[name] for name in VPAWEB)


def test_the_demo_env_file_is_marked_and_complete():
    text = (ROOT / "deploy" / "compose" / "demo.env").read_text()
    assert text.startswith("# DEMO VALUES")
    names = {
        line.split("=", 1)[0]
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    assert {
        "SECRET_KEY",
        "DATABASE_URL",
        "REDIS_URL",
        "POSTGRES_USER",
        "POSTGRES_PASSWORD",
        "POSTGRES_DB",
    } <= names


def test_the_webhook_profile_serves_with_the_certificate_its_one_shot_makes():
    from recommender.management.commands.webhook import Command

    certs, webhook = SERVICES["webhook-certs"], SERVICES["webhook"]
    assert certs["profiles"] == webhook["profiles"] == ["webhook"]
    assert certs["image"] == webhook["image"] == "${VPAWEB_IMAGE:-vpaweb:local}"
    assert certs["volumes"] == ["webhook-tls:/var/lib/vpaweb-webhook"]
    assert webhook["volumes"] == ["webhook-tls:/var/lib/vpaweb-webhook:ro"]
    assert "webhook-tls" in COMPOSE["volumes"]
    assert webhook["depends_on"] == {
        "migrate": {"condition": "service_completed_successfully"},
        "webhook-certs": {"condition": "service_completed_successfully"},
    }
    # Both commands parse with the command's own parser, on the same directory.
    shell = certs["command"][2].split()
    made = vars(
        Command()
        .create_parser("manage.py", "webhook")
        .parse_args(shell[shell.index("webhook") + 1 :])
    )
    assert made["action"] == "certs" and "webhook" in made["dns"]
    assert webhook["command"][:2] == ["manage", "webhook"]
    served = vars(
        Command()
        .create_parser("manage.py", "webhook")
        .parse_args(webhook["command"][2:])
    )
    assert served["action"] == "serve"
    assert served["cert"] == f"{made['out']}/tls.crt"
    assert served["key"] == f"{made['out']}/tls.key"
    assert f"{made['out']}/ca.crt" in " ".join(webhook["healthcheck"]["test"])
    assert webhook["environment"]["VPAWEB_METRICS_TOKEN_FILE"]
