"""Checks dashboards against Grafana's own model of a dashboard, read at run time.

Grafana's foundation SDK (PyPI `grafana-foundation-sdk`) carries the dashboard, panel,
field-config and query models generated from Grafana's schemas; `@grafana/data` (npm) carries
the list of unit ids the unit picker offers. Neither is part of this repository: the caller puts
the SDK on PYTHONPATH and names the unpacked `@grafana/data` package.

Usage: check_dashboards.py --grafana-data DIR DASHBOARD.json...
Prints one line per finding and exits 1 when there is any; prints a summary line otherwise.
"""

import argparse
import enum
import importlib.metadata
import json
import re
import sys
import types
import typing
from pathlib import Path

from grafana_foundation_sdk.cog import encoder as cogencoder
from grafana_foundation_sdk.cog import plugins as cogplugins
from grafana_foundation_sdk.cog import runtime as cogruntime
from grafana_foundation_sdk.models import dashboard as gmodel

# Units Grafana builds from a prefix and free text (its getValueFormat), besides the listed ids.
UNIT_PREFIXES = ("prefix:", "suffix:", "si:", "count:", "currency:", "time:")


def unit_ids(package: Path) -> set[str]:
    """Every unit id of Grafana's unit picker, from @grafana/data's compiled categories."""
    source = (package / "dist/esm/valueFormats/categories.mjs").read_text(encoding="utf-8")
    ids = set(re.findall(r'\bid:\s*"([^"]+)"', source))
    # A layout change in the package must not turn into "no unit is known".
    if len(ids) < 100 or "short" not in ids:
        raise SystemExit(f"{package}: found only {len(ids)} unit ids; has the package's layout changed?")
    return ids


def encode(model: typing.Any) -> typing.Any:
    """The model as plain JSON values, as the SDK writes it."""
    return json.loads(json.dumps(model, cls=cogencoder.JSONEncoder))


def lost(before: typing.Any, after: typing.Any, path: str) -> list[str]:
    """Every key or value of `before` that `after` does not keep. Keys the SDK adds with
    Grafana's defaults are not a loss."""
    if isinstance(before, dict):
        if not isinstance(after, dict):
            return [f"{path}: an object became {json.dumps(after)}"]
        out = []
        for key, value in before.items():
            if key not in after:
                # Grafana reads an explicit null as an absent field, as the SDK writes it.
                if value is None:
                    continue
                out.append(f"{path}.{key}: dropped by Grafana's model (not a field it knows here)")
            else:
                out.extend(lost(value, after[key], f"{path}.{key}"))
        return out
    if isinstance(before, list):
        if not isinstance(after, list) or len(after) != len(before):
            return [f"{path}: a list of {len(before)} became {json.dumps(after)}"]
        return [m for i, (b, a) in enumerate(zip(before, after)) for m in lost(b, a, f"{path}[{i}]")]
    if before != after or type(before) is not type(after) and not (
        isinstance(before, (int, float)) and isinstance(after, (int, float))
    ):
        return [f"{path}: {json.dumps(before)} became {json.dumps(after)}"]
    return []


def fits(value: typing.Any, hint: typing.Any) -> bool:
    """Whether a decoded value is of the type the model declares."""
    if hint is typing.Any or hint is object:
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(fits(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin is list:
        (item,) = typing.get_args(hint) or (typing.Any,)
        return isinstance(value, list) and all(fits(v, item) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return isinstance(value, hint) or value in {m.value for m in hint}
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if isinstance(hint, type):
        # The SDK keeps some nested lists (transformations) as plain objects; those must
        # decode as the declared model.
        return isinstance(value, hint) or isinstance(value, dict) and hasattr(hint, "from_json")
    return True


def as_model(value: typing.Any, hint: typing.Any) -> typing.Any:
    """A plain object the SDK left undecoded, decoded as the model its field declares."""
    if not isinstance(value, dict):
        return value
    for h in typing.get_args(hint) or (hint,):
        if isinstance(h, type) and hasattr(h, "from_json"):
            return h.from_json(value)
    return value


def mistyped(model: typing.Any, path: str) -> list[str]:
    """Every field of a decoded model whose value is not of its declared type (an enum value
    Grafana does not have, a string where a number belongs), walking nested models."""
    if isinstance(model, list):
        return [m for i, v in enumerate(model) for m in mistyped(v, f"{path}[{i}]")]
    if not hasattr(model, "to_json") or isinstance(model, cogruntime.UnknownDataquery):
        return []
    try:
        hints = typing.get_type_hints(type(model).__init__)
    except (NameError, TypeError):
        return []
    out = []
    for name, hint in hints.items():
        if name == "return" or not hasattr(model, name):
            continue
        value = getattr(model, name)
        if not fits(value, hint):
            out.append(f"{path}.{name}: {value!r} is not a {hint}")
            continue
        if isinstance(value, list) and typing.get_origin(hint) in (typing.Union, types.UnionType, list):
            items = [a for h in typing.get_args(hint) for a in (typing.get_args(h) or ())]
            item = next((i for i in items if isinstance(i, type) and hasattr(i, "from_json")), None)
            if item is not None and any(isinstance(v, dict) for v in value):
                decoded = [as_model(v, item) for v in value]
                out.extend(lost(value, encode(decoded), f"{path}.{name}"))
                value = decoded
        out.extend(mistyped(value, f"{path}.{name}"))
    return out


def panels(dashboard: dict) -> list[dict]:
    out = []
    for panel in dashboard.get("panels", []):
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def check_panel(panel: dict, where: str, units: set[str]) -> tuple[list[str], int]:
    findings = []
    kind = panel.get("type", "")
    if kind == "row":
        return findings, 0
    config = cogruntime.Runtime().panelcfg_config(kind)
    if config is None:
        return [f"{where}: panel type {kind!r} is not a Grafana panel"], 0
    field_config = panel.get("fieldConfig", {})
    custom = field_config.get("defaults", {}).get("custom", {})
    if custom and config.field_config_from_json_hook is None:
        findings.append(f"{where}.fieldConfig.defaults.custom: a {kind} panel has no custom field config")
    for i, override in enumerate(field_config.get("overrides", [])):
        for j, prop in enumerate(override.get("properties", [])):
            at = f"{where}.fieldConfig.overrides[{i}].properties[{j}]"
            pid = prop.get("id", "")
            if pid.startswith("custom."):
                if config.field_config_from_json_hook is None:
                    findings.append(f"{at}: a {kind} panel has no custom field config ({pid})")
                    continue
                model = config.field_config_from_json_hook({pid[len("custom."):]: prop.get("value")})
            else:
                model = gmodel.FieldConfig.from_json({pid: prop.get("value")})
            findings.extend(f"{at} ({pid}){m}" for m in lost({pid.removeprefix("custom."): prop.get("value")}, encode(model), ""))
            findings.extend(mistyped(model, f"{at} ({pid})"))
    checked_units = 0
    unit_places = [("fieldConfig.defaults.unit", field_config.get("defaults", {}).get("unit"))]
    for i, override in enumerate(field_config.get("overrides", [])):
        for j, prop in enumerate(override.get("properties", [])):
            if prop.get("id") == "unit":
                unit_places.append((f"fieldConfig.overrides[{i}].properties[{j}]", prop.get("value")))
    for at, unit in unit_places:
        if unit is None:
            continue
        checked_units += 1
        if not (unit in units or isinstance(unit, str) and unit.startswith(UNIT_PREFIXES)):
            findings.append(f"{where}.{at}: unit {unit!r} is not one of Grafana's unit ids")
    return findings, checked_units


def check(file: Path, units: set[str]) -> tuple[list[str], int, int]:
    raw = json.loads(file.read_text(encoding="utf-8"))
    name = file.name
    model = gmodel.Dashboard.from_json(raw)
    findings = lost(raw, encode(model), name)
    findings.extend(mistyped(model, name))
    checked_units = 0
    every = panels(raw)
    for i, panel in enumerate(every):
        where = f"{name}: panel {panel.get('title', i)!r}"
        more, n = check_panel(panel, where, units)
        findings.extend(more)
        checked_units += n
    return findings, len(every), checked_units


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--grafana-data", type=Path, required=True)
    parser.add_argument("dashboards", type=Path, nargs="+")
    args = parser.parse_args()
    cogplugins.register_default_plugins()
    units = unit_ids(args.grafana_data)
    data_version = json.loads((args.grafana_data / "package.json").read_text())["version"]
    findings, total_panels, total_units = [], 0, 0
    for file in args.dashboards:
        more, n, u = check(file, units)
        findings.extend(more)
        total_panels += n
        total_units += u
    for line in findings:
        print(line)
    sdk = importlib.metadata.version("grafana-foundation-sdk")
    print(
        f"{len(args.dashboards)} dashboards, {total_panels} panels, {total_units} units checked "
        f"against grafana-foundation-sdk {sdk} and @grafana/data {data_version} "
        f"({len(units)} unit ids): {len(findings)} findings"
    )
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
