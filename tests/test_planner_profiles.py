"""Device profiles: every preset loads, and a bad file is one error naming the file and
the field."""

import random
from pathlib import Path

import pytest
import yaml

from offlow.errors import OfflowError
from offlow.planner import profile

PRESETS = ["bluefield-2", "bluefield-3", "cmp-nic-200", "cmp-nic-400", "h100-pcie5", "host",
           "liquidio-cn23xx", "lso-risc", "nfp-4000", "xeon-phi-5110p"]


def test_the_issues_presets_are_there():
    assert profile.names() == PRESETS


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_loads_and_cites_its_sources(name):
    p = profile.load(name)
    assert p.name == name
    assert p.sources and p.cores >= 1 and p.clock_mhz > 0
    assert set(p.speed) == {"integer", "lookup", "hash"}
    text = (profile.PRESETS / f"{name}.yaml").read_text()
    assert text.startswith("#"), "each preset opens with a comment saying where it comes from"


def test_the_seed_figures_are_the_seeds():
    liquidio, cmp, nfp = (profile.load(n) for n in ("liquidio-cn23xx", "cmp-nic-200",
                                                     "nfp-4000"))
    assert (liquidio.cores, liquidio.clock_mhz) == (12, 1200)  # Floem's slides
    assert (cmp.cores, cmp.clock_mhz, cmp.speed["integer"]) == (4, 200, 0.1)  # seed 004
    assert [m.name for m in nfp.memory] == ["CLS", "CTM", "IMEM", "EMEM"]  # NFComms Table 1
    assert profile.load("host").link is not None and profile.load("host").speed["lookup"] == 1


def _write(tmp_path: Path, doc) -> Path:
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _base() -> dict:
    return yaml.safe_load((profile.PRESETS / "bluefield-2.yaml").read_text())


@pytest.mark.parametrize("field", ["cores", "clock_mhz", "speed", "memory", "limits", "name",
                                   "sources"])
def test_a_missing_field_is_named_with_the_file(tmp_path, field):
    doc = _base()
    del doc[field]
    path = _write(tmp_path, doc)
    with pytest.raises(OfflowError) as e:
        profile.load(path)
    assert str(path) in str(e.value) and f"`{field}`" in str(e.value)


@pytest.mark.parametrize("where,key,value,named", [
    ("speed", "lookup", None, "speed.lookup"),
    ("speed", "hash", -1, "speed.hash"),
    ("speed", "integer", "fast", "speed.integer"),
    ("interconnect", "gbps", 0, "interconnect.gbps"),
    ("interconnect", "dma_gbps", None, "interconnect.dma_gbps"),
    ("limits", "memory_mb", True, "limits.memory_mb"),
])
def test_a_bad_nested_field_is_named_by_its_path(tmp_path, where, key, value, named):
    doc = _base()
    if value is None:
        del doc[where][key]
    else:
        doc[where][key] = value
    with pytest.raises(OfflowError, match=rf"mine.yaml: .*`{named}`"):
        profile.load(_write(tmp_path, doc))


def test_a_bad_memory_level_names_its_index(tmp_path):
    doc = _base()
    del doc["memory"][2]["latency_ns"]
    with pytest.raises(OfflowError, match=r"missing field `memory\[2\].latency_ns`"):
        profile.load(_write(tmp_path, doc))


def test_fractional_cores_and_unknown_fields_are_refused(tmp_path):
    doc = _base()
    doc["cores"] = 2.5
    with pytest.raises(OfflowError, match="`cores` must be a whole number"):
        profile.load(_write(tmp_path, doc))
    doc = _base()
    doc["speed"]["crypto"] = 2
    with pytest.raises(OfflowError, match="unknown field `speed.crypto`"):
        profile.load(_write(tmp_path, doc))


def test_not_yaml_not_a_mapping_and_no_such_preset(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cores: [1, 2\n")
    with pytest.raises(OfflowError, match="bad.yaml: not valid YAML"):
        profile.load(bad)
    bad.write_text("- just a list\n")
    with pytest.raises(OfflowError, match="bad.yaml: the file must be a mapping"):
        profile.load(bad)
    with pytest.raises(OfflowError, match="no device profile `bluefield-9`: the presets are"):
        profile.load("bluefield-9")
    with pytest.raises(OfflowError, match="nowhere.yaml: No such file"):
        profile.load(tmp_path / "nowhere.yaml")
    bad.write_bytes(b"cores: \xff\xfe\n")
    with pytest.raises(OfflowError, match="bad.yaml: not UTF-8 text"):
        profile.load(bad)


def test_a_device_without_an_interconnect_is_this_host(tmp_path):
    doc = _base()
    del doc["interconnect"]
    assert profile.load(_write(tmp_path, doc)).link is None


def _mutations(doc, rng):
    """Random damage to a profile document: fields removed, replaced by values of the
    wrong type, nested in lists, or the file's text cut or garbled."""
    junk = [None, -1, 0, "x", [], {}, [1, 2], {"a": 1}, True, 1e309, float("nan"), "1e3"]
    out = yaml.safe_load(yaml.safe_dump(doc))
    for _ in range(rng.randint(1, 4)):
        node, key = out, None
        while isinstance(node, dict | list) and node and rng.random() < 0.7:
            key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
            if not isinstance(node[key], dict | list):
                break
            node = node[key]
        if not isinstance(node, dict | list) or not node:
            continue
        key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
        if isinstance(node, dict) and rng.random() < 0.3:
            del node[key]
        else:
            node[key] = rng.choice(junk)
    return out


def test_fuzzed_profiles_give_one_clear_error_or_a_profile(tmp_path):
    rng = random.Random(30)
    base = _base()
    path = tmp_path / "fuzz.yaml"
    for k in range(250):
        if k % 5 == 4:  # the text itself cut or garbled
            text = yaml.safe_dump(base)
            cut = rng.randrange(len(text))
            path.write_text(text[:cut] + rng.choice(["", ":", "- [", "{", "\t", "\x00"]))
        else:
            path.write_text(yaml.safe_dump(_mutations(base, rng)))
        try:
            p = profile.load(path)
        except OfflowError as e:
            assert str(e).startswith(f"device profile {path}: ")
            continue
        assert p.cores >= 1 and all(v > 0 for v in p.speed.values())
