"""deploy/'s files that need no running process: the compose file and the Kubernetes manifests
against their real JSON schemas (from pinned PyPI packages, so the check is offline: the Compose
Specification's schema as check-jsonschema ships it, Kubernetes v1.34.0's strict schemas as
kubernetes-validate ships them), what
they must say to keep a class up (probes, Redis's append-only file on a volume, sticky
sessions, websocket timeouts), nginx's configs (no internal address to clients, limits per
address, the compose copy the same as the template), and constraints.txt (every package the
app imports, and all they need, pinned at the installed version)."""

from __future__ import annotations

import copy
import importlib.resources
import json
import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource

from deploy import cluster as deploy
from deploy import pins

pytestmark = pytest.mark.unit

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
# requirements-dev.txt pins both packages: the schemas change only with a pin.
COMPOSE_SCHEMA = importlib.resources.files("check_jsonschema") / "builtin_schemas" / "vendor" / "compose-spec.json"
K8S_SCHEMAS = importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema" / "v1.34.0-local-strict"
KINDS = {("apps/v1", "Deployment"): "deployment-apps-v1.json",
         ("apps/v1", "StatefulSet"): "statefulset-apps-v1.json",
         ("v1", "Service"): "service-v1.json",
         ("networking.k8s.io/v1", "Ingress"): "ingress-networking-v1.json"}
HEALTH = "/_stcore/health"


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text("utf-8"))


def compose_errors(doc: dict) -> list[str]:
    schema = json.loads(COMPOSE_SCHEMA.read_text("utf-8"))
    validator = jsonschema.validators.validator_for(schema)(schema)      # the draft the schema names
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def manifests() -> list[tuple[str, dict]]:
    """(file name, document) for every document in deploy/k8s/*.yaml."""
    return [(path.name, doc) for path in sorted((DEPLOY / "k8s").glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text("utf-8")) if doc is not None]


def _k8s_registry() -> Registry:
    definitions = json.loads((K8S_SCHEMAS / "_definitions.json").read_text("utf-8"))
    return Registry().with_resource(definitions["$id"], Resource.from_contents(definitions))


REGISTRY = _k8s_registry()


def k8s_errors(doc: dict) -> list[str]:
    """The schema errors of one Kubernetes object (its kind's strict schema: no unknown field)."""
    key = (doc.get("apiVersion"), doc.get("kind"))
    if key not in KINDS:
        return [f"no schema listed for {key}: add its file of {K8S_SCHEMAS} to KINDS"]
    schema = json.loads((K8S_SCHEMAS / KINDS[key]).read_text("utf-8"))
    validator = jsonschema.Draft202012Validator(schema, registry=REGISTRY)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def by_kind(kind: str) -> list[dict]:
    return [doc for _, doc in manifests() if doc["kind"] == kind]


# ---- the compose file ----

def test_the_compose_file_is_valid_against_the_compose_spec():
    assert compose_errors(compose()) == []


@pytest.mark.parametrize("break_it", [
    lambda d: d["services"]["app"].update(replica=2),                          # a misspelt key
    lambda d: d["services"]["redis"].update(restart=["always"]),               # a wrong type
    lambda d: d["services"]["nginx"].update(ports="8080:80"),                  # not a list
    lambda d: d["services"]["app"]["depends_on"]["redis"].update(condition="healthy"),   # not a condition
])
def test_a_broken_compose_file_fails_the_schema(break_it):
    doc = copy.deepcopy(compose())
    break_it(doc)
    assert compose_errors(doc)


def test_the_compose_file_keeps_a_class_up():
    services = compose()["services"]
    app, redis, nginx = services["app"], services["redis"], services["nginx"]
    assert app["deploy"]["replicas"] >= 2 and app["restart"] == redis["restart"] == nginx["restart"] == "unless-stopped"
    assert HEALTH in " ".join(app["healthcheck"]["test"])
    assert app["environment"]["DECODER_LAB_REDIS_URL"] == "redis://redis:6379/0"
    assert "DECODER_LAB_COOKIE_SECRET:?" in app["environment"]["STREAMLIT_SERVER_COOKIE_SECRET"]   # required, shared
    assert (DEPLOY / app["build"]["dockerfile"].removeprefix("deploy/")).exists()
    # Redis: the append-only file, in a named volume.
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    data = command[command.index("--dir") + 1]
    assert any(v.split(":")[0] in compose()["volumes"] and v.split(":")[1] == data for v in redis["volumes"])
    # nginx: the compose config, mounted where the image reads it.
    mounted = {v.split(":")[0]: v.split(":")[1] for v in nginx["volumes"]}
    assert mounted["./compose-nginx.conf"] == "/etc/nginx/nginx.conf"


def test_the_dockerfile_installs_the_pinned_packages_and_serves_on_its_port():
    text = (DEPLOY / "Dockerfile").read_text("utf-8")
    assert "./lab install" in text and "constraints.txt" in text
    assert "-r requirements.txt -c constraints.txt" in (DEPLOY.parent / "lab").read_text("utf-8")
    assert "EXPOSE 8501" in text and HEALTH in text and '"--server.port", "8501"' in text


# ---- the Kubernetes manifests ----

def test_the_kubernetes_manifests_are_valid_against_their_schemas():
    docs = manifests()
    assert {(d["apiVersion"], d["kind"]) for _, d in docs} == set(KINDS)
    for name, doc in docs:
        assert k8s_errors(doc) == [], (name, doc["kind"])


@pytest.mark.parametrize("break_it", [
    lambda d: d["spec"].update(replica=2),                                                   # misspelt
    lambda d: d["spec"].update(replicas="two"),                                              # a wrong type
    lambda d: d["spec"]["template"]["spec"]["containers"][0].update(readinesProbe={}),       # misspelt
    lambda d: d["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"].pop("port"),   # required
    lambda d: d.update(kind="Deploymant"),                                                   # no such kind
])
def test_a_broken_manifest_fails_the_schema(break_it):
    deployment = copy.deepcopy(by_kind("Deployment")[0])
    break_it(deployment)
    assert k8s_errors(deployment)


def test_the_app_deployment_has_health_probes_and_a_shared_cookie_secret():
    (deployment,) = by_kind("Deployment")
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    port_names = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert port_names == {"http": 8501}
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"] == {"path": HEALTH, "port": "http"}, probe
    env = {e["name"]: e for e in container["env"]}
    assert env["DECODER_LAB_REDIS_URL"]["value"] == "redis://decoder-lab-redis:6379/0"
    assert "secretKeyRef" in env["STREAMLIT_SERVER_COOKIE_SECRET"]["valueFrom"]
    assert deployment["spec"]["replicas"] >= 2
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    services = {s["metadata"]["name"]: s for s in by_kind("Service")}
    assert services["decoder-lab"]["spec"]["selector"].items() <= labels.items()


def test_redis_keeps_its_append_only_file_on_a_persistent_volume():
    (redis,) = by_kind("StatefulSet")
    (container,) = redis["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert args[args.index("--appendonly") + 1] == "yes"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    claims = {c["metadata"]["name"] for c in redis["spec"]["volumeClaimTemplates"]}
    assert mounts.keys() & claims and args[args.index("--dir") + 1] in mounts.values()
    services = {s["metadata"]["name"]: s for s in by_kind("Service")}
    assert services["decoder-lab-redis"]["spec"]["selector"].items() <= redis["spec"]["template"]["metadata"]["labels"].items()


def test_the_ingress_is_sticky_with_websocket_timeouts():
    (ingress,) = by_kind("Ingress")
    notes = ingress["metadata"]["annotations"]
    assert notes["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert int(notes["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600
    assert int(notes["nginx.ingress.kubernetes.io/proxy-send-timeout"]) >= 3600
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == "decoder-lab"


# ---- nginx ----

def _between(text: str, begin: str, end: str) -> str:
    return text[text.index(begin):text.index(end)]


def test_the_compose_nginx_config_has_the_same_rules_as_the_template():
    template = (DEPLOY / "nginx.conf.template").read_text("utf-8")
    composed = (DEPLOY / "compose-nginx.conf").read_text("utf-8")
    for begin, end in (("# ---- shared: ", "# ---- shared until here"),
                       ("# ---- shared location: ", "# ---- shared location until here")):
        assert _between(template, begin, end) == _between(composed, begin, end)


@pytest.mark.parametrize("name", ["nginx.conf.template", "compose-nginx.conf"])
def test_nginx_tells_clients_no_internal_address_and_limits_each_address(name):
    text = (DEPLOY / name).read_text("utf-8")
    directives = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    assert not [d for d in directives if d.startswith("add_header") and "upstream" in d.lower()]
    assert "server_tokens off;" in directives
    zones = [d for d in directives if d.startswith("limit_req_zone")]
    bursts = {re.search(r"zone=(\w+)", d).group(1): int(re.search(r"burst=(\d+)", d).group(1))
              for d in directives if d.startswith("limit_req ")}
    conns = next(d for d in directives if d.startswith("limit_conn "))
    assert len(zones) == len(bursts) == 2 and "$binary_remote_addr" in text
    # A class of 30 behind one NAT opening the course at once: 150 requests each (140-odd
    # static files, 10 for the page) over up to 7 connections (nginx.conf.template's comment).
    assert bursts["decoder_lab_static"] >= 30 * 145 and bursts["decoder_lab_req"] >= 30 * 10
    assert int(conns.split()[-1].rstrip(";")) >= 30 * 7


@pytest.mark.skipif(not Path(deploy.NGINX).exists(), reason="nginx not installed (apt-get install -y nginx)")
def test_the_rendered_template_passes_nginx_t(tmp_path):
    for sub in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (tmp_path / sub).mkdir()
    conf = tmp_path / "nginx.conf"
    conf.write_text(deploy.render_config(tmp_path, "127.0.0.1:18080", [18081, 18082]), "utf-8")
    done = subprocess.run([deploy.NGINX, "-t", "-p", str(tmp_path), "-c", str(conf), "-e", str(tmp_path / "e.log")],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def test_the_access_log_names_the_process_that_answered():
    line = '127.0.0.1 [05/Dec/2026:10:00:00 +0000] "GET /_stcore/health?probe=x HTTP/1.1" 200 2 ' \
           'upstream=127.0.0.1:4001, 127.0.0.1:4002 route=abc rt=0.004'
    assert deploy.answered_by(line) == "127.0.0.1:4002"          # the first was down: the second answered
    assert deploy.answered_by(line.replace("127.0.0.1:4001, ", "")) == "127.0.0.1:4002"


def test_supervisord_config_restarts_every_program_and_escapes_values(tmp_path):
    programs = [deploy.Program("redis", ["/usr/bin/redis-server", "--save", ""], 10),
                deploy.Program("app0", ["/venv/bin/python", "-m", "server.serve"], 20,
                               env={"DECODER_LAB_PUBLIC_URL": "http://lab.example/a%20b"}, cwd=tmp_path)]
    text = deploy.render_supervisor_config(tmp_path, programs)
    import configparser
    parsed = configparser.RawConfigParser()
    parsed.read_string(text)
    for name in ("program:redis", "program:app0"):
        assert parsed[name]["autorestart"] == "true"
    assert parsed["program:redis"]["command"] == "/usr/bin/redis-server --save ''"
    assert parsed["program:app0"]["environment"] == 'DECODER_LAB_PUBLIC_URL="http://lab.example/a%%20b"'
    with pytest.raises(ValueError):
        deploy.render_supervisor_config(tmp_path, [deploy.Program("x", ["true"], 1, env={"A": 'say "hi"'})])


# ---- pinned packages ----

def test_every_package_the_app_imports_is_pinned_with_all_it_needs():
    pinned = pins.pinned()
    imported = pins.imported_distributions()
    assert "" not in imported, f"imported but not installed: {imported.get('')}"
    for needed in ("streamlit", "torch", "redis", "supervisor"):
        assert needed in imported
    needed = pins.closure(imported) | pins.closure(pins.top_requirements())
    # The server stack under Streamlit is among them, not only the top-level packages.
    assert {"starlette", "uvicorn", "protobuf", "pillow", "requests", "urllib3"} <= needed
    unpinned = sorted(needed - set(pinned))
    assert not unpinned, f"not in constraints.txt: {unpinned} (python -m deploy.pins > constraints.txt)"
    stale = {name: (pinned[name], pins.installed(name)) for name in needed if pinned[name] != pins.installed(name)}
    assert not stale, f"constraints.txt differs from the venv (pinned, installed): {stale}"


def test_the_top_level_requirements_agree_with_the_constraints():
    pinned = pins.pinned()
    for name in pins.REQUIREMENTS:
        for line in (DEPLOY.parent / name).read_text("utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                package, version = line.split("==")
                assert pinned[pins.canonicalize_name(package)] == version, line


def test_the_constraints_parser_rejects_a_loose_pin(tmp_path):
    (tmp_path / "c.txt").write_text("streamlit>=1.0\n")
    with pytest.raises(ValueError):
        pins.pinned(tmp_path / "c.txt")


def test_supervisord_is_installed_beside_this_python():
    assert Path(deploy.SUPERVISORD).exists() or shutil.which("supervisord"), deploy.SUPERVISORD
