"""docs/architecture.md's "Plugging in" paragraph, tried: each kind of addition it names, added the way it says.

A new CRD kind is one CustomResourceDefinition registered in the kind registry (api/kinds.py); validation against
its schema, structural defaults, the store's scope, `kubetwin run`'s creation order and `kubetwin get`'s resource
names and printer columns follow from it with no other change.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from typer.testing import CliRunner

from kubetwin.api import kinds
from kubetwin.api.loader import load_paths
from kubetwin.cli.main import app
from kubetwin.validation.validate import validate

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

# A made-up CRD, written as a project would ship it (apiextensions.k8s.io/v1).
MODEL_CACHE_CRD = yaml.safe_load("""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: modelcaches.cache.example.com}
spec:
  group: cache.example.com
  scope: Namespaced
  names: {kind: ModelCache, plural: modelcaches, singular: modelcache, shortNames: [mcache]}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    additionalPrinterColumns:
    - {name: Model, type: string, jsonPath: .spec.model}
    - {name: Tier, type: string, jsonPath: .spec.tier}
    - {name: Size, type: string, jsonPath: .spec.size, priority: 1}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [model]
            properties:
              model: {type: string}
              tier: {type: string, default: ssd, enum: [ssd, hyperdisk]}
              size: {type: string}
""")

OBJECT = """apiVersion: cache.example.com/v1alpha1
kind: ModelCache
metadata: {name: llama, namespace: default}
spec:
  model: meta-llama/Llama-3.1-8B
  size: 64Gi
"""


def _errors(tmp_path: Path, text: str) -> list:
    f = tmp_path / "cache.yaml"
    f.write_text(text)
    return [d for d in validate(load_paths([str(f)])) if d.severity == "error"]


def test_a_crd_kind_registered_once_is_validated_defaulted_scoped_ordered_and_printed(tmp_path: Path) -> None:
    with kinds.registered(kinds.from_crd(MODEL_CACHE_CRD, create_order=3)):
        # validate: the CRD's schema, in the API server's words, with the closest field name
        assert _errors(tmp_path, OBJECT) == []
        bad = _errors(tmp_path, OBJECT.replace("  model:", "  modle:"))
        assert any(d.field == "spec.modle" and "model" in d.hint for d in bad), bad
        bad = _errors(tmp_path, OBJECT.replace("  model: meta-llama/Llama-3.1-8B\n", ""))
        assert any("Required value" in d.message and d.field == "spec.model" for d in bad), bad
        bad = _errors(tmp_path, OBJECT + "  tier: nvme\n")
        assert [d.field for d in bad] == ["spec.tier"] and "Unsupported value" in bad[0].message
        # scope and creation order come from the registry
        assert not kinds.is_cluster_scoped("ModelCache")
        assert kinds.create_order("ModelCache") == 3
        # run: stored with the schema's default; get by short name prints the CRD's columns (Size only wide)
        (tmp_path / "cache.yaml").write_text(OBJECT)
        out = tmp_path / "run"
        res = CliRunner().invoke(app, ["run", str(EXAMPLES / "kueue-cohort-borrowing.yaml"),
                                       str(tmp_path / "cache.yaml"), "--out", str(out), "--duration", "10m"])
        assert res.exit_code == 0, res.output
        for args, header, row in ((["mcache"], ["NAME", "MODEL", "TIER"], ["llama", "meta-llama/Llama-3.1-8B", "ssd"]),
                                  (["modelcaches.cache.example.com", "-o", "wide"], ["NAME", "MODEL", "TIER", "SIZE"],
                                   ["llama", "meta-llama/Llama-3.1-8B", "ssd", "64Gi"])):
            res = CliRunner().invoke(app, ["get", *args, "--run", str(out)])
            assert res.exit_code == 0, res.output
            rows = [re.split(r"\s{2,}", line.strip()) for line in res.output.strip().splitlines()]
            assert rows == [header, row]
    # gone with the with-block: an unknown kind again
    assert kinds.REGISTRY.resolve("mcache") is None
    assert not kinds.REGISTRY.is_custom("cache.example.com", "ModelCache")
