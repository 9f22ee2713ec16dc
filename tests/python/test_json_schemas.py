"""Every command's --json output against its JSON Schema (docs/schemas/, docs/json.md), on real recordings.

Run by CTest (tests/CMakeLists.txt) with FRAGLAB_CLI (the built fraglab) and FRAGLAB_SOURCE_DIR, with
Debian's python3-jsonschema. Each case runs the command and validates what it printed; a key renamed,
removed or retyped, or a list printed as an object, fails.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import jsonschema

SOURCE = os.environ.get("FRAGLAB_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ["FRAGLAB_CLI"]
SCHEMAS = os.path.join(SOURCE, "docs", "schemas")
SNAP = os.path.join(SOURCE, "tests", "data", "snapshots")
FIT = os.path.join(SOURCE, "tests", "data", "fit")
OOM = os.path.join(SNAP, "bert_varlen_oom.default_cap0.16_ring8000.pickle.gz")
OTHER = os.path.join(SNAP, "bert_varlen_oom.expandable_segments-True_large_segment_size_mb-32_cap0.16_ring8000.pickle.gz")
SEED = os.path.join(SOURCE, "traces", "corpus", "seed_examples.default.pickle.gz")
PROBES = [f"{os.path.join(FIT, f'kv_server.b{b}.default.pickle.gz')}@{b}" for b in (2, 4, 6)]

# command -> argument lists whose outputs together cover the command's shapes (optional keys included)
CASES = {
    "info": [["info", OOM], ["info", OOM, "--at", "oom"], ["info", SEED]],
    "replay": [["replay", OOM, "-p", "pytorch"], ["replay", SEED, "-p", "pytorch", "bestfit", "tlsf"],
               ["replay", OOM, "-p", "bestfit", "--capacity", "8GiB", "--on-oom", "skip"]],
    "fidelity": [["fidelity", OOM], ["fidelity", SEED, "--policy", "pytorch:expandable_segments:True"]],
    "tune": [["tune", SEED, "-j", "2"], ["tune", OOM, "-j", "2"]],
    "diagnose": [["diagnose", OOM, "-j", "2"], ["diagnose", SEED, "--at", "peak", "--no-search"],
                 ["diagnose", os.path.join(FIT, "kv_server.b36.default_cap0.0451.pickle.gz"), "--capacity",
                  "6769955602", "-j", "2", "--probe", PROBES[0], "--probe", PROBES[1]]],
    "diff": [["diff", OOM, OTHER], ["diff", SEED, OOM, "--capacity", "20GiB"],
             ["diff", os.path.join(SNAP, "ranks", "ddp_train.default"), os.path.join(SNAP, "ranks", "ddp_train.expandable")]],
    "fit": [["fit", *PROBES, "--capacity", "6769955602", "-j", "2", "--no-search"]],
    "ranks": [["ranks", os.path.join(SNAP, "ranks")]],
    "policies": [["policies"]],
}


def run(args):
    done = subprocess.run([CLI, *args, "--json"], capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise AssertionError(f"fraglab {' '.join(args)} --json exited {done.returncode}: {done.stderr}")
    return json.loads(done.stdout)


class JsonSchemas(unittest.TestCase):
    def validate(self, command, document):
        with open(os.path.join(SCHEMAS, f"{command}.schema.json")) as f:
            schema = json.load(f)
        jsonschema.Draft202012Validator.check_schema(schema)
        jsonschema.Draft202012Validator(schema).validate(document)
        self.assertEqual(document["schema_version"], 1)
        self.assertEqual(document["command"], command)

    def test_every_command_against_its_schema(self):
        for command, cases in CASES.items():
            for args in cases:
                with self.subTest(args=" ".join(os.path.basename(a) for a in args)):
                    self.validate(command, run(args))

    def test_compare_results_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "results.json")
            subprocess.run([CLI, "compare", SEED, OOM, "--policies", "bestfit,pytorch", "-q", "--json", out],
                           check=True, capture_output=True)
            with open(out) as f:
                self.validate("compare", json.load(f))

    def test_replay_is_a_list_for_one_policy_too(self):
        self.assertEqual(len(run(["replay", SEED, "-p", "bestfit"])["results"]), 1)

    def test_diff_of_rank_sets_lists_one_pair_per_rank(self):
        doc = run(["diff", os.path.join(SNAP, "ranks", "ddp_train.default"),
                   os.path.join(SNAP, "ranks", "ddp_train.expandable")])
        self.validate("diff", doc)
        self.assertEqual([r["rank"] for r in doc["ranks"]], [0, 1])
        with open(os.path.join(SCHEMAS, "diff.schema.json")) as f:
            schema = json.load(f)
        for r in doc["ranks"]:  # each the shape of a two-trace diff, with its rank
            self.assertIn("delta", r)
        broken = json.loads(json.dumps(doc))
        del broken["ranks"][1]["a"]
        with self.assertRaises(jsonschema.ValidationError):
            jsonschema.Draft202012Validator(schema).validate(broken)
        broken = json.loads(json.dumps(doc))
        broken["ranks"][0]["rank"] = "0"
        with self.assertRaises(jsonschema.ValidationError):
            jsonschema.Draft202012Validator(schema).validate(broken)

    def test_a_renamed_key_fails(self):
        document = run(["replay", SEED, "-p", "bestfit"])
        calls = document["results"][0]["device_calls"]
        calls["segment_alloc"] = calls.pop("segment_allocs")
        with self.assertRaises(jsonschema.ValidationError):
            self.validate("replay", document)

    def test_the_same_quantity_has_the_same_key_everywhere(self):
        replay = run(["replay", OOM, "-p", "pytorch"])["results"][0]
        diff = run(["diff", OOM, OTHER])["a"]
        for key in ("peak_reserved", "peak_allocated"):
            self.assertIsInstance(replay[key], int)
            self.assertIsInstance(diff[key], int)
        self.assertEqual(replay["peak_reserved"], diff["peak_reserved"])
        self.assertEqual(set(replay["device_calls"]), set(diff["device_calls"]))
        self.assertIn("external_fragmentation", replay["fragmentation_at_peak"])
        self.assertIn("external_fragmentation", diff["fragmentation_at_peak"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
