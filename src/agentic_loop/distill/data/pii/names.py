"""Names of people by context and by name lists, for texts the small spaCy model gets wrong.

spaCy's small English model misses names it has rarely seen (Dutch,
Nigerian, Indian, Korean...), lowercase names, and a surname standing alone
("Hello Aarav, Mehta here"), and it calls a sentence-initial verb
("Summarise") or an id token a person. :func:`find_names` adds rules that
need no model, and :func:`plausible_person` vets spaCy's guesses:

* **titles** ("Mr.", "Ms", "Dr.", "Prof.") and **salutations** ("Dear",
  "Hi", "Hello", "Hey") mark the name-like words after them;
* **sign-offs and introductions**: "<Name> here", "Regards, <Name>",
  "my name is <name>";
* **name lists**: a first name followed by a surname, capitalized or all
  lowercase ("emily johnson"), from the person-name lists of every
  Latin-script locale that ``Faker`` ships (about 8,700 first names and
  8,600 surnames from ~60 locales, Nigeria, India, the Netherlands and
  Kenya included), plus romanized Korean names (a surname and a two-syllable
  given name: "Kim Min-jun", "Seo-yeon Park");
* English words (from the spaCy model's lemmatizer tables, the same
  package the spaCy mode uses) keep "Dear Hiring Manager", "Hi there" and
  "Summarise" from becoming names.

Record-level propagation (every part of a name found anywhere in a run is
removed everywhere in that run) lives in
:mod:`agentic_loop.distill.data.redact`; :func:`name_parts` says which parts.

Example:
    >>> text = "Hello Aarav, Mehta here. Dear Ms. van der Berg, thanks. cc emily johnson"
    >>> [text[s:e] for s, e, _ in find_names(text)]
    ['Aarav', 'Mehta', 'van der Berg', 'emily johnson']
    >>> [text[s:e] for s, e, _ in find_names("Summarise the notes. Hi there, team!")]
    []
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from agentic_loop.distill.data.pii.gazetteer import PLACE_WORDS, is_place

__all__ = ["PLACE_WORDS", "code_like", "find_names", "is_english_word", "name_lists",
           "name_parts", "plausible_person"]

# abbreviations in any case; full words capitalized only ("I miss Jakarta" is no title)
_TITLES = (r"(?:(?i:Mr|Mrs|Ms|Mx|Dr|Prof|Mme|Mlle|Sr|Sra)\.?|"
           r"(?:Miss|Professor|Sir|Dame|Madam|Herr|Frau|Doctor)\b)")
_SALUTES = (r"(?:Dear|Hi|Hello|Hey|Hiya|Greetings|Good\s+(?:morning|afternoon|evening)|Car[oa]|"
            r"Gentil[ei]|Querid[oa]|Estimad[oa]|Prezad[oa]|Ch[eè]re?|Bonjour|Hola|Ol[aá]|Ciao|"
            r"Hallo|Liebe[r]?|Sehr\s+geehrte[rs]?|Geachte|Drog[ia]|Szanown[ya]|Hej)")
_SIGNOFFS = (r"(?:Regards|Best\s+regards|Kind\s+regards|Warm\s+regards|Best\s+wishes|Best|"
             r"Thanks|Thank\s+you|Many\s+thanks|Cheers|Sincerely|Yours(?:\s+(?:truly|sincerely))?|"
             r"Cordially|Respectfully|Merry\s+Christmas|Happy\s+Holidays|(?:Viele\s+|Beste\s+|Liebe\s+|Herzliche\s+)?Gr[üu](?:ß|ss)e|"
             r"Mit\s+freundlichen\s+Gr[üu](?:ß|ss)en|(?:Bien\s+)?[Cc]ordialement|Bien\s+à\s+vous|Saludos|Atentamente|"
             r"Un\s+saludo|(?:Cordiali|Distinti)\s+saluti|Saluti|Atenciosamente|Abraços|"
             r"Met\s+vriendelijke\s+groet(?:en)?|Groeten|Pozdrawiam|Z\s+poważaniem|Hälsningar)")
_TOKEN = r"[A-Za-z\u00c0-\u024f\u1e00-\u1eff][A-Za-z\u00c0-\u024f\u1e00-\u1eff'\-]*"  # Vietnamese
_SEQ = rf"{_TOKEN}(?:[ \t]+{_TOKEN}){{0,3}}"
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("title", re.compile(rf"\b{_TITLES}[ \t]+({_SEQ})")),
    ("salutation", re.compile(rf"(?:^|(?<=[\s,.;:!?(\"']))(?i:{_SALUTES}),?[ \t]+"
                              rf"(?!{_TITLES}[ \t])({_SEQ})")),
    ("here", re.compile(rf"(?:^|(?<=[,.;:!?\n])\s*)(?i:it'?s[ \t]+|this[ \t]+is[ \t]+)?"
                        rf"({_TOKEN}(?:[ \t]+{_TOKEN})?)[ \t]+here\b")),
    ("signoff", re.compile(rf"\b{_SIGNOFFS}(?:[ \t]*,[ \t]*\n?|[ \t]*\n)[ \t]*({_SEQ})")),
    # "TODO(Hiroshi Tanaka):", "FIXME(jdoe)": the person a code comment assigns work to
    ("todo", re.compile(r"\b(?:TODO|FIXME|XXX|HACK|NOTE)\(([^()\n]{2,40})\)")),
    ("introduction", re.compile(rf"(?i:\bmy\s+name\s+is|\bcall\s+me|\bname:|\bsigned,?)"
                                rf"[ \t]+({_SEQ})")),
    # "a customer named Ravi Iyer": capitalized (not all-caps) words only, "named tuple" is none
    ("named", re.compile(r"\b(?:named|called)[ \t]+([A-Z][a-z\u00df-\u024f'\-]+"
                         r"(?:[ \t]+[A-Z][a-z\u00df-\u024f'\-]+){0,2})(?![\w])")),
)
_CAP = (r"[A-Z\u00c0-\u00de\u1e00-\u1eff][a-z\u00df-\u024f\u1e00-\u1eff']+"
        r"(?:-[A-Z\u00c0-\u00de]?[a-z\u00df-\u024f\u1e00-\u1eff']+)*(?![\w])")  # "Al-Sayed" too
# "Explain to Priyanka Ramaswamy why": capitalized words after a verb's preposition
_ADDRESSED = re.compile(
    r"(?<![\w])(?i:to|for|with|from|by|cc|ask|tell|thank|invite|remind|notify|inform|"
    r"congratulate|email|call|contact|meet|help|pay|assist|answer|about|and|"
    # the same in French, German, Spanish, Italian, Portuguese, Dutch, Polish (a listed name needed)
    r"(?P<native>à|pour|avec|par|für|mit|von|para|con|por|per|com|aan|voor|met|dla|przez|od))"
    r"(?:[ \t]*:)?[ \t]+"  # "cc: María José Fernández"
    rf"(?P<name>{_CAP}(?:[ \t]+(?:(?:de|van|der|von|da|di|del|la|le|bin|al|el)[ \t]+)?{_CAP})"
    r"{1,2})")
#: Words after a salutation or before "here" that address no one in particular.
GENERIC = frozenset("""
sir madam team all everyone everybody there friend friends customer customers colleague
colleagues hiring manager managers valued user users support folks guys world again both you
committee board member members partner partners client clients applicant applicants candidate
reader readers neighbour neighbor neighbours neighbors mom mum dad sales admin human resources
hr whom concern y'all people ladies gentlemen student students parents teacher staff and or
grüße grüsse gruß mundo todos tous tutti zusammen
the a an to my our your his her their its this that these those what who we i me us it is
was are were be been am not no yes ok okay so just only also then now here there again new
""".split())
PARTICLES = frozenset("de van der den von da di du del della la le bin binti bint al el ter ten "
                      "dos das do e y mac st".split())
_KOREAN_SURNAMES = frozenset("""
kim lee yi rhee park pak bak choi choe jung jeong chung kang cho jo yoon yun jang chang lim
im han oh seo suh shin sin kwon hwang ahn song yoo yu ryu hong jeon chun ko moon mun yang son
bae baek paik heo nam noh roh kwak sung cha joo woo min jin ji eom um chae cheon bang gong hyun
ham byun yeom yeo choo seok ma gil yeon wi pyo myung ban ra wang geum yook maeng tak kook jegal
""".split())
_SYLLABLE = (r"(?:kk|tt|pp|ss|jj|ch|g|k|n|d|t|r|l|m|b|p|s|j|h|y|w)?"
             r"(?:yae|yeo|wae|ae|ya|eo|ye|wa|oe|yo|wo|we|wi|yu|eu|ui|a|e|o|u|i)"
             r"(?:ng|k|n|t|l|m|p)?")
_KOREAN_GIVEN = re.compile(rf"{_SYLLABLE}-?{_SYLLABLE}")
_WORDS = re.compile(_TOKEN)
_UNDECOMPOSED = str.maketrans({"ł": "l", "Ł": "L", "ø": "o", "Ø": "O", "đ": "d", "Đ": "D",
                               "ı": "i", "ß": "ss", "æ": "ae", "œ": "oe"})
_GREETING = re.compile(rf"(?i:{_SIGNOFFS}|{_SALUTES})(?![\w])")
_LATIN_NAME = re.compile(rf"{_TOKEN}(?: {_TOKEN})*")
_FIRST_ATTRS = ("first_names", "first_names_male", "first_names_female", "first_romanized_names",
                "first_romanized_names_male", "first_romanized_names_female")
_LAST_ATTRS = ("last_names", "last_names_male", "last_names_female", "last_romanized_names",
               "male_last_names", "unisex_last_names")
# feminine and inflected surname endings -> the listed form (Wiśniewska -> wiśniewski)
_SURNAME_FORMS = (("ska", "ski"), ("cka", "cki"), ("ová", ""), ("ova", "ov"), ("eva", "ev"))


@lru_cache(maxsize=1)
def name_lists() -> tuple[frozenset[str], frozenset[str]]:
    """Lowercased first names and surname parts of every Latin-script ``Faker`` locale."""
    import importlib
    import pkgutil

    import faker.providers.person as person

    first: set[str] = set()
    last: set[str] = set()
    for module in pkgutil.iter_modules(person.__path__):
        provider = getattr(importlib.import_module(f"{person.__name__}.{module.name}"),
                           "Provider", None)
        for attr, into in [*((a, first) for a in _FIRST_ATTRS), *((a, last) for a in _LAST_ATTRS)]:
            names = getattr(provider, attr, ())
            for name in names if isinstance(names, (tuple, list, dict)) else ():
                if isinstance(name, str) and _LATIN_NAME.fullmatch(name):
                    parts = [p for p in name.lower().split() if p not in PARTICLES]
                    into.update(parts)
                    into.update(_ascii(p) for p in parts)  # "martinez" as people type it
    return frozenset(first), frozenset(last)


@lru_cache(maxsize=1)
def _english() -> frozenset[str]:
    from spacy.lang.en.stop_words import STOP_WORDS
    from spacy.lookups import Lookups

    from agentic_loop.distill.data.pii.entities import DEFAULT_SPACY_MODEL
    words = set(STOP_WORDS)
    for folder in Path(_package_dir(DEFAULT_SPACY_MODEL)).glob("*/lemmatizer/lookups"):
        lookups = Lookups().from_disk(folder)
        for table in ("lemma_index", "lemma_exc"):
            for entries in lookups.get_table(table).values():
                words.update(w for w in entries if "_" not in w)
    return frozenset(words)


def _package_dir(name: str) -> str:
    """The folder of an installed package (the spaCy model ships its lemmatizer tables there)."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        from agentic_loop.distill.data.pii.entities import PiiError

        raise PiiError(f"package {name!r} is not installed; install the `pii` extra "
                       "(pip install 'agentic-loop[pii]')")
    return str(Path(spec.origin).parent)


def is_english_word(word: str) -> bool:
    """Whether ``word`` (any case) is an English dictionary word or a stop word.

    >>> is_english_word("Summarise"), is_english_word("Okonkwo"), is_english_word("reports")
    (True, False, True)
    """
    low = word.lower().strip("'")
    words = _english()
    if low in words:
        return True
    # the tables hold lemmas: "reports", "waited", "shipping", "quickly" are English too
    for suffix, repl in (("ies", "y"), ("es", ""), ("s", ""), ("ed", ""), ("ed", "e"),
                         ("ing", ""), ("ing", "e"), ("ly", ""), ("er", ""), ("est", "")):
        if low.endswith(suffix) and len(low) > len(suffix) + 2 and (
                low[:-len(suffix)] + repl) in words:
            return True
    return False


def _base(word: str) -> str:
    """``word`` without a possessive ending (Deshpande's -> Deshpande)."""
    return re.sub(r"['\u2019]s$", "", word)


def _ascii(word: str) -> str:
    """``word`` without accents (Martínez -> martinez, Małgorzata -> malgorzata)."""
    import unicodedata

    word = word.translate(_UNDECOMPOSED)  # letters NFKD does not split into base and accent
    return "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))


def _is_first(word: str) -> bool:
    return word.lower() in name_lists()[0] or _ascii(word.lower()) in name_lists()[0]


def _is_last(word: str) -> bool:
    low = word.lower()
    return low in name_lists()[1] or _ascii(low) in name_lists()[1] or low in _KOREAN_SURNAMES or (
        any(
        low.endswith(end) and len(low) > len(end) + 2 and low[:-len(end)] + base in name_lists()[1]
        for end, base in _SURNAME_FORMS))


def _korean_given(word: str) -> bool:
    return bool(_KOREAN_GIVEN.fullmatch(word.lower())) and not is_english_word(word)


def _name_like(word: str, *, strong: bool) -> bool:
    """Whether a word after a title (``strong``) or a salutation can be part of a name."""
    low = word.lower()
    if low in GENERIC or len(low) < 2:
        return False
    if word[0].isupper():
        return strong or not is_english_word(word) or _is_first(word) or _is_last(word)
    return not is_english_word(word) or _is_first(word)


def _take(text: str, start: int, seq: str, *, strong: bool) -> tuple[int, int] | None:
    """The longest name-like prefix of the words ``seq`` (particles allowed inside)."""
    end, last_good = start, None
    for match in _WORDS.finditer(seq):
        word = _base(match.group())
        if word.lower() in PARTICLES:  # "de Vries", "van der Berg": kept only before a name
            continue
        if not _name_like(word, strong=strong):
            break
        if last_good is not None and word[0].isupper() != seq[0].isupper() and not strong:
            break
        last_good = start + match.end()
        end = last_good
    if last_good is None:
        return None
    first = _WORDS.search(seq)
    assert first is not None
    return start + first.start(), end


def _pairs(text: str) -> Iterator[tuple[int, int, str]]:
    """First name + surname by the name lists (first names before them too: "Fatima Zahra
    Benali"), and romanized Korean names."""
    words = list(_WORDS.finditer(text))
    for k, (a, b) in enumerate(zip(words, words[1:], strict=False)):
        gap = text[a.end():b.start()]
        if gap not in (" ", "\t"):
            continue
        x, y = _base(a.group()), _base(b.group())
        if _style(x) != _style(y):  # "My NINO", "Ana SMITH" are no pairs; "ANA SMITH" is
            continue
        if (x.lower() in _KOREAN_SURNAMES and _korean_given(y)) or (
                _korean_given(x) and y.lower() in _KOREAN_SURNAMES):
            yield a.start(), b.end(), "korean_name"
        elif _is_first(x) and _is_last(y) and not (is_english_word(x) and is_english_word(y)
                                                   ) and not is_place(f"{x} {y}"):  # Hong Kong
            while k and text[words[k - 1].end():words[k].start()] == " " and _style(
                    words[k - 1].group()) == _style(x) and _is_first(words[k - 1].group()
                                                            ) and not is_english_word(x):
                k, x = k - 1, words[k - 1].group()
            yield words[k].start(), b.end(), "name_list"


def _style(word: str) -> str:
    """``"upper"`` (two capitals or more, all caps), ``"title"``, ``"lower"`` or ``"mixed"``."""
    if word.isupper() and len(word) > 1:
        return "upper"
    if word[0].isupper():
        return "title"
    return "lower" if word.islower() else "mixed"


def _addressed(text: str) -> Iterator[tuple[int, int, str]]:
    """Capitalized first and last names after "to", "for", "with", "ask"... ("Explain to
    Priyanka Ramaswamy why"): no word is an English word unless it is a listed name, and
    the whole is no known place ("to Buenos Aires") nor a place phrase ("Victoria Station")."""
    for match in _ADDRESSED.finditer(text):
        value = match.group("name")
        words = [_base(w) for w in value.split() if w.lower() not in PARTICLES]
        if words[-1].lower() in PLACE_WORDS or any(w.lower() in GENERIC for w in words):
            continue
        english = [is_english_word(w) and not (_is_first(w) or _is_last(w)) for w in words]
        if match.group("native") and not any(_is_first(w) or _is_last(w) for w in words):
            continue  # "für Deutsche Bahn": German capitalizes every noun
        if not any(english):
            if not is_place(value):
                yield match.start("name"), match.end("name"), "addressed"


def find_names(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, rule)`` of every name the rules find (overlaps left to the caller)."""
    found: list[tuple[int, int, str]] = []
    for rule, pattern in _RULES:
        strong = rule == "title"
        for match in pattern.finditer(text):
            span = _take(text, match.start(1), match.group(1), strong=strong)
            if span is None:
                continue
            if rule in ("here", "signoff") and not _plausible_words(text[span[0]:span[1]]):
                continue
            found.append((*span, rule))
    found.extend(_pairs(text))
    found.extend(_addressed(text))
    if not text.isascii():
        from agentic_loop.distill.data.pii.script_names import find_script_names

        found.extend((start, end, "script") for start, end in find_script_names(text))
    by_span: dict[tuple[int, int], str] = {}
    for start, end, rule in found:  # one rule names a span: the first that found it
        by_span.setdefault((start, end), rule)
    return sorted((s, e, rule) for (s, e), rule in by_span.items())


def _plausible_words(value: str) -> bool:
    """A sign-off or "... here" name: each word a known name or not an English word."""
    words = [w for w in value.split() if w.lower() not in PARTICLES]
    return bool(words) and all(_is_first(w) or _is_last(w) or not is_english_word(w)
                               for w in words)


def code_like(value: str) -> bool:
    """Whether an entity guess is a piece of code or an id (``get_user(user_id``, ``a.b``).

    >>> code_like("bcrypt.hashpw(password.encode"), code_like("St. Louis")
    (True, False)
    """
    return bool(re.search(r"[_@/<>#=:(){}\[\]\\|`]|\.\w", value))


def plausible_person(text: str, start: int, end: int) -> bool:
    """Whether spaCy's ``PERSON`` at ``text[start:end]`` can be a name (not an id or a verb).

    >>> plausible_person("Summarise the meeting notes.", 0, 9)
    False
    >>> plausible_person("Ticket ORD-7781-KX from Femke", 7, 18)
    False
    >>> plausible_person("Ask Femke Janssen about it", 4, 17)
    True
    >>> plausible_person("Vielen Dank!", 0, 11), plausible_person("in Buenos Aires", 3, 15)
    (False, False)
    """
    value = text[start:end]
    if code_like(value) or re.search(r"\d", value) or is_place(value) or re.fullmatch(
            r"[a-z]{2,3}(?:-[A-Za-z]{2,8})+", value):  # a language tag: "zh-Hans-CN"
        return False  # an id, a piece of code, or a known place ("Buenos Aires", "Kraków")
    if any(m.start() <= start and end <= m.end() for m in _GREETING.finditer(text)):
        return False  # "Mit freundlichen Grüßen", "Bien cordialement": a greeting, no one
    if not re.search(r"[A-Za-z\u00c0-\u024f]", value):  # another script: its rules decide
        from agentic_loop.distill.data.pii.script_names import find_script_names

        return any(s < end and start < e for s, e in find_script_names(text))
    if not any(c.islower() for c in value):
        return False  # "ORD", "NASA": all capitals
    words = [w for w in value.split() if w.lower() not in PARTICLES]
    if words and _foreign_stop_word(words[0]):
        return False  # a phrase of another language: "Vielen Dank", "Ihre Nachricht"
    if len(words) > 1 and (words[-1].lower() in PLACE_WORDS or (not _is_last(words[-1]) and all(
            map(is_english_word, words)))):
        return False  # "Victoria Station"; English words, no surname last: "Deep Learning"
    if len(words) == 1:
        word = words[0]
        return _is_first(word) or _is_last(word) or not is_english_word(word)
    return not all(is_english_word(w) and not (_is_first(w) or _is_last(w)) for w in words)


@lru_cache(maxsize=1)
def _foreign_stop_words() -> frozenset[str]:
    """Stop words of German, Spanish, French, Italian, Portuguese and Dutch (spaCy's lists).

    Each list file is run on its own: importing ``spacy.lang.fr`` would
    compile its tokenizer exceptions first (seconds of regex work).
    """
    import importlib.util
    from pathlib import Path

    spacy = importlib.util.find_spec("spacy")
    assert spacy is not None and spacy.origin is not None
    words: set[str] = set()
    for lang in ("de", "es", "fr", "it", "pt", "nl"):
        path = Path(spacy.origin).parent / "lang" / lang / "stop_words.py"
        spec = importlib.util.spec_from_file_location(f"_stop_words_{lang}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        words |= set(module.STOP_WORDS)
    return frozenset(words)


def _foreign_stop_word(word: str) -> bool:
    """A stop word of another language that is no listed name ("Ihre" yes, "Ella" no)."""
    low = word.lower().strip(".,'")
    return low in _foreign_stop_words() and not (_is_first(low) or _is_last(low))


def name_parts(value: str) -> tuple[list[str], list[str]]:
    """The parts of a found name to remove everywhere in its record.

    Returns ``(any_case, exact_case)``: the whole name and its parts that are
    no English word match in any case; parts that are English words ("Grace",
    "Park") match only capitalized as written.

    >>> name_parts("Ms. Grace van Dijk")
    (['Grace van Dijk', 'Dijk'], ['Grace'])
    """
    value = re.sub(rf"^(?:{_TITLES}|(?i:{_SALUTES}))\.?\s+", "", value.strip())
    value = " ".join(_base(w.strip(".,'\"")) for w in value.split())
    words = value.split()
    anycase, exact = [value] if len(words) > 1 else [], []
    for word in words:
        low = word.lower()
        if len(low) < 2 or low in PARTICLES or low in GENERIC:
            continue
        if is_english_word(word):
            exact.append(word[0].upper() + word[1:])
        else:
            anycase.append(word)
    return anycase, exact
