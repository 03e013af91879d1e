"""The ready reference table: exact unit conversion factors and element data, and its lookup tool.

Why these facts: the tool tasks (:mod:`agentic_loop.tasks.tool_tasks`) ask for
conversions and element data that a 135M model does not know reliably, so a
correct answer needs a lookup. Every conversion factor here is *exact by
definition* (the international yard and pound of 1959, the US gallon of 231
cubic inches, the thermochemical calorie, the IT British thermal unit, the
standard atmosphere), so a task's answer is exact too. Atomic weights are
IUPAC's abridged standard atomic weights (grams per mole), as printed on
periodic tables.

Example:
    >>> REFERENCE_TABLE["mile"], REFERENCE_TABLE["iron"]
    ('1 mile = 1609.344 meters', 'iron (Fe): atomic number 26, atomic weight 55.845 grams per mole')
    >>> call = {"type": "tool_call", "name": "lookup", "id": "1"}
    >>> reference_lookup.invoke({**call, "args": {"key": "Feet"}}).content
    '1 foot = 0.3048 meters'
"""

from __future__ import annotations

from typing import NamedTuple

from agentic_loop.tools.lookup import lookup_tool
from agentic_loop.tools.safe import SafeTool

__all__ = ["ELEMENTS", "REFERENCE_TABLE", "UNITS", "Element", "Unit", "reference_lookup"]


class Unit(NamedTuple):
    """A unit, how many ``target`` units one of it is (exact, as text), and its plural."""

    name: str
    factor: str
    target: str
    plural: str


class Element(NamedTuple):
    """A chemical element: symbol, atomic number and standard atomic weight (as text)."""

    name: str
    symbol: str
    number: int
    weight: str


UNITS: tuple[Unit, ...] = (
    Unit("inch", "0.0254", "meters", "inches"),
    Unit("foot", "0.3048", "meters", "feet"),
    Unit("yard", "0.9144", "meters", "yards"),
    Unit("mile", "1609.344", "meters", "miles"),
    Unit("nautical mile", "1852", "meters", "nautical miles"),
    Unit("furlong", "201.168", "meters", "furlongs"),
    Unit("fathom", "1.8288", "meters", "fathoms"),
    Unit("chain", "20.1168", "meters", "chains"),
    Unit("pound", "0.45359237", "kilograms", "pounds"),
    Unit("ounce", "28.349523125", "grams", "ounces"),
    Unit("stone", "6.35029318", "kilograms", "stones"),
    Unit("short ton", "907.18474", "kilograms", "short tons"),
    Unit("long ton", "1016.0469088", "kilograms", "long tons"),
    Unit("grain", "64.79891", "milligrams", "grains"),
    Unit("carat", "200", "milligrams", "carats"),
    Unit("us gallon", "3.785411784", "liters", "US gallons"),
    Unit("us quart", "0.946352946", "liters", "US quarts"),
    Unit("us pint", "0.473176473", "liters", "US pints"),
    Unit("us fluid ounce", "29.5735295625", "milliliters", "US fluid ounces"),
    Unit("imperial gallon", "4.54609", "liters", "imperial gallons"),
    Unit("imperial pint", "0.56826125", "liters", "imperial pints"),
    Unit("acre", "4046.8564224", "square meters", "acres"),
    Unit("hectare", "10000", "square meters", "hectares"),
    Unit("square foot", "0.09290304", "square meters", "square feet"),
    Unit("square mile", "2.589988110336", "square kilometers", "square miles"),
    Unit("calorie", "4.184", "joules", "calories"),
    Unit("kilocalorie", "4.184", "kilojoules", "kilocalories"),
    Unit("kilowatt hour", "3.6", "megajoules", "kilowatt hours"),
    Unit("british thermal unit", "1055.05585262", "joules", "British thermal units"),
    Unit("standard atmosphere", "101.325", "kilopascals", "standard atmospheres"),
    Unit("bar", "100", "kilopascals", "bars"),
)

ELEMENTS: tuple[Element, ...] = (
    Element("hydrogen", "H", 1, "1.008"), Element("helium", "He", 2, "4.0026"),
    Element("lithium", "Li", 3, "6.94"), Element("carbon", "C", 6, "12.011"),
    Element("nitrogen", "N", 7, "14.007"), Element("oxygen", "O", 8, "15.999"),
    Element("neon", "Ne", 10, "20.180"), Element("sodium", "Na", 11, "22.990"),
    Element("magnesium", "Mg", 12, "24.305"), Element("aluminium", "Al", 13, "26.982"),
    Element("silicon", "Si", 14, "28.085"), Element("phosphorus", "P", 15, "30.974"),
    Element("sulfur", "S", 16, "32.06"), Element("chlorine", "Cl", 17, "35.45"),
    Element("argon", "Ar", 18, "39.95"), Element("potassium", "K", 19, "39.098"),
    Element("calcium", "Ca", 20, "40.078"), Element("titanium", "Ti", 22, "47.867"),
    Element("iron", "Fe", 26, "55.845"), Element("cobalt", "Co", 27, "58.933"),
    Element("nickel", "Ni", 28, "58.693"), Element("copper", "Cu", 29, "63.546"),
    Element("zinc", "Zn", 30, "65.38"), Element("silver", "Ag", 47, "107.87"),
    Element("tin", "Sn", 50, "118.71"), Element("iodine", "I", 53, "126.90"),
    Element("tungsten", "W", 74, "183.84"), Element("platinum", "Pt", 78, "195.08"),
    Element("gold", "Au", 79, "196.97"), Element("mercury", "Hg", 80, "200.59"),
    Element("lead", "Pb", 82, "207.2"), Element("uranium", "U", 92, "238.03"),
)

_ABBREVIATIONS = {"ft": "foot", "yd": "yard", "mi": "mile", "lb": "pound", "oz": "ounce",
                  "gallon": "us gallon", "quart": "us quart", "pint": "us pint",
                  "fluid ounce": "us fluid ounce", "kwh": "kilowatt hour",
                  "btu": "british thermal unit", "atm": "standard atmosphere",
                  "atmosphere": "standard atmosphere", "aluminum": "aluminium",
                  "sulphur": "sulfur"}


def _table() -> dict[str, str]:
    table = {u.name: f"1 {u.name.replace('us ', 'US ')} = {u.factor} {u.target}" for u in UNITS}
    table |= {e.name: f"{e.name} ({e.symbol}): atomic number {e.number}, "
                      f"atomic weight {e.weight} grams per mole" for e in ELEMENTS}
    return table | {short: table[full] for short, full in _ABBREVIATIONS.items()}


#: Unit names (and a few abbreviations) and element names to their facts, as one line each.
REFERENCE_TABLE: dict[str, str] = _table()

#: The ready lookup tool over :data:`REFERENCE_TABLE`, named ``lookup``.
reference_lookup: SafeTool = lookup_tool(
    REFERENCE_TABLE, name="lookup",
    description="Look up a unit conversion factor or a chemical element's data. The key is a "
                "unit name such as 'mile', 'pound' or 'US gallon', or an element name such as "
                "'iron'. Returns one line, e.g. '1 mile = 1609.344 meters'.",
)
