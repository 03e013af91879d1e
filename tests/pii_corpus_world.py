"""Generated multilingual PII corpora: planted values (templates x values) and benign texts.

Shared by ``bench/pii.py`` and the PII tests. Nothing here is a fixed list
tuned against the recognizers: every value is made by code from a seed,

* national ID numbers are random numbers of each format made valid by the
  checksum's own definition (``python-stdnum`` checks each one; some come
  from Faker's locale providers, written their way);
* names come from Faker's locales in nine non-Latin scripts (``name_script``),
  or are made outside its lists (``name_script_unlisted``: Latin names
  transliterated to Cyrillic and Greek, Chinese and Korean names composed
  from a surname and random characters), or are Latin full names in a task's
  running text (``name_in_task``);
* addresses are Faker's, in the layouts of 15 locales (its own formats,
  written independently of the address patterns);
* e-mails and phones are Faker's, rewritten with spaces, spelled ``at`` /
  ``dot`` in several languages, or digits as words;

and each value is placed into a template drawn from several per kind, in
several languages; drafts echo the value the way a model's reply would.
``benign_texts()`` holds text with no personal data: places in many scripts,
versions, dates, hashes, UUIDs, order numbers, product codes, maths, prices,
ordinary sentences in 14 languages, and talk *about* IDs and passports.

A record has the shape of :data:`pii_corpus.RECORDS`; :func:`leaks` says
whether a planted value survived (a name: any of its parts; Han, kana,
Hangul and Thai names as substrings, since those scripts write no spaces).
"""

from __future__ import annotations

import random
import re
import string
import uuid
from typing import Any

from faker import Faker

SEED = 29
ID_KINDS = ("id_de_tax", "id_de_card", "id_fr_nir", "id_it_cf", "id_es_dni", "id_es_nie",
            "id_pl_pesel", "id_uk_nino", "id_uk_nhs", "id_cn_ric", "id_in_aadhaar", "id_in_pan",
            "id_jp_my_number", "id_br_cpf", "id_br_cnpj")
NAME_KINDS = ("name_script", "name_script_unlisted", "name_in_task")
KINDS = (*ID_KINDS, "passport", *NAME_KINDS, "address_world", "spaced_email", "spaced_phone")
_UNSPACED = re.compile(r"[\u0e00-\u0e7f\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]")


def _faker(locale: str, rng: random.Random) -> Faker:
    fake = Faker(locale)
    fake.seed_instance(rng.randrange(1 << 30))
    return fake


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.digits) for _ in range(n))


def _until_valid(rng: random.Random, make: Any, check: Any) -> str:
    while True:
        value = make(rng)
        if check(value):
            return str(value)


def _icao(value: str) -> str:
    """ICAO 9303 check digit (7-3-1 weights): German ID cards and passports."""
    weights = (7, 3, 1)
    total = sum((int(c) if c.isdigit() else ord(c) - 55) * weights[i % 3]
                for i, c in enumerate(value))
    return str(total % 10)


def _group(value: str, sizes: tuple[int, ...]) -> str:
    out, i = [], 0
    for size in sizes:
        out.append(value[i:i + size])
        i += size
    return " ".join(out)


def national_id(kind: str, rng: random.Random) -> str:
    """A valid number of ``kind`` (see :data:`ID_KINDS`), in one of its usual spellings."""
    from stdnum import verhoeff
    from stdnum.br import cnpj, cpf
    from stdnum.cn import ric
    from stdnum.de import idnr
    from stdnum.gb import nhs
    from stdnum.jp import in_
    from stdnum.pl import pesel

    if kind == "id_de_tax":
        return _until_valid(rng, lambda r: str(r.randint(1, 9)) + _digits(r, 10), idnr.is_valid)
    if kind == "id_de_card":
        body = rng.choice("CFGHJKLMNPRTVWXYZ") + "".join(
            rng.choice("CFGHJKLMNPRTVWXYZ0123456789") for _ in range(7))
        return body + _icao(body)
    if kind == "id_fr_nir":
        value = _faker("fr_FR", rng).ssn()
        return _group(value, (1, 2, 2, 2, 3, 3, 2)) if rng.random() < 0.5 else value
    if kind == "id_it_cf":
        return _faker("it_IT", rng).ssn()
    if kind == "id_es_dni":
        return _faker("es_ES", rng).nif()
    if kind == "id_es_nie":
        return _faker("es_ES", rng).nie()
    if kind == "id_pl_pesel":
        return _until_valid(rng, lambda r: _faker("pl_PL", r).pesel(), pesel.is_valid)
    if kind == "id_uk_nino":
        first = rng.choice("ABCEGHJKLMNOPRSTWXYZ")
        second = rng.choice("ABCEGHJKLMNPRSTWXYZ")
        if first + second in ("BG", "GB", "NK", "KN", "NT", "TN", "ZZ"):
            second = "A"
        value = f"{first}{second}{_digits(rng, 6)}{rng.choice('ABCD')}"
        return _group(value, (2, 2, 2, 2, 1)) if rng.random() < 0.5 else value
    if kind == "id_uk_nhs":
        value = _until_valid(rng, lambda r: _digits(r, 10), nhs.is_valid)
        return _group(value, (3, 3, 4)) if rng.random() < 0.6 else value
    if kind == "id_cn_ric":
        region = rng.choice(["110105", "310104", "440305", "510107", "330106", "420111"])
        body = (f"{region}{rng.randint(1950, 2005)}{rng.randint(1, 12):02d}"
                f"{rng.randint(1, 28):02d}{_digits(rng, 3)}")
        return body + ric.calc_check_digit(body + "0")  # stdnum's takes the check digit's place
    if kind == "id_in_aadhaar":
        body = str(rng.randint(2, 9)) + _digits(rng, 10)
        value = body + verhoeff.calc_check_digit(body)
        return _group(value, (4, 4, 4)) if rng.random() < 0.6 else value
    if kind == "id_in_pan":
        return _faker("en_IN", rng).bothify("???P?####?", letters=string.ascii_uppercase)
    if kind == "id_jp_my_number":
        body = _digits(rng, 11)
        value = body + in_.calc_check_digit(body)
        return _group(value, (4, 4, 4)) if rng.random() < 0.5 else value
    if kind == "id_br_cpf":
        value = _faker("pt_BR", rng).cpf()
        return cpf.compact(value) if rng.random() < 0.3 else value
    if kind == "id_br_cnpj":
        value = _faker("pt_BR", rng).cnpj()
        return cnpj.compact(value) if rng.random() < 0.3 else value
    raise KeyError(f"unknown id kind {kind!r}; use one of {', '.join(ID_KINDS)}")


#: stdnum's own check of each kind that has one (the generators above must pass it).
STDNUM_CHECKS = {"id_de_tax": "de.idnr", "id_fr_nir": "fr.nir", "id_it_cf": "it.codicefiscale",
                 "id_es_dni": "es.dni", "id_es_nie": "es.nie", "id_pl_pesel": "pl.pesel",
                 "id_uk_nhs": "gb.nhs", "id_in_aadhaar": "in_.aadhaar", "id_in_pan": "in_.pan",
                 "id_jp_my_number": "jp.in_", "id_br_cpf": "br.cpf", "id_br_cnpj": "br.cnpj"}


def is_valid_id(kind: str, value: str) -> bool:
    """stdnum's verdict on ``value`` (China: checksum and birth date, not the county list)."""
    import importlib

    if kind == "id_cn_ric":
        from stdnum.cn import ric

        number = ric.compact(value)
        return ric.calc_check_digit(number) == number[-1] and bool(ric.get_birth_date(number))
    if kind == "id_de_card":
        return _icao(value[:-1]) == value[-1]
    if kind not in STDNUM_CHECKS:
        return True
    return bool(importlib.import_module(f"stdnum.{STDNUM_CHECKS[kind]}").is_valid(value))


def passport_number(rng: random.Random) -> str:
    """A passport number in one of 12 countries' formats (US, UK, DE, FR, ES, IT, IN, CN...)."""
    upper = string.ascii_uppercase
    formats = [
        lambda: _digits(rng, 9), lambda: _digits(rng, 9),
        lambda: (lambda b: b + _icao(b))("C" + "".join(rng.choice("CFGHJKLMNPRTVWXYZ0123456789")
                                                     for _ in range(7))),
        lambda: _digits(rng, 2) + rng.choice(upper) + rng.choice(upper) + _digits(rng, 5),
        lambda: "".join(rng.choice(upper) for _ in range(3)) + _digits(rng, 6),
        lambda: rng.choice(upper) + rng.choice(upper) + _digits(rng, 7),
        lambda: rng.choice(upper) + _digits(rng, 7),
        lambda: rng.choice("EG") + _digits(rng, 8),
        lambda: rng.choice(upper) + rng.choice(upper) + _digits(rng, 7),
        lambda: "M" + _digits(rng, 8),
        lambda: rng.choice(upper) + rng.choice(upper) + _digits(rng, 6),
        lambda: _digits(rng, 2) + " " + _digits(rng, 7),
    ]
    return rng.choice(formats)()


ID_TEMPLATES: dict[str, list[str]] = {
    "id_de_tax": ["Meine Steuer-ID lautet {v}.", "Steuerliche Identifikationsnummer: {v}",
                  "My German tax ID is {v}; please update the payroll."],
    "id_de_card": ["Personalausweisnummer {v}", "Die Ausweisnummer ist {v}.",
                   "Her German ID card number: {v}"],
    "id_fr_nir": ["Mon numéro de sécurité sociale est le {v}.", "NIR : {v}",
                  "His French social security number is {v}.", "Dossier {v} à traiter."],
    "id_it_cf": ["Il mio codice fiscale è {v}.", "C.F. {v}", "Please check fiscal code {v}.",
                 "Intestato a {v}, grazie."],
    "id_es_dni": ["Mi DNI es {v}.", "NIF: {v}", "Her Spanish ID is {v}.", "Titular {v}."],
    "id_es_nie": ["Mi NIE es {v}.", "NIE: {v}", "Número de identidad de extranjero {v}"],
    "id_pl_pesel": ["Mój PESEL to {v}.", "PESEL: {v}", "Polish national ID number {v}"],
    "id_uk_nino": ["My National Insurance number is {v}.", "NI number: {v}",
                   "Payroll has {v} on file."],
    "id_uk_nhs": ["NHS number {v}", "My NHS number is {v}.", "Patient (NHS no. {v}) was seen."],
    "id_cn_ric": ["我的身份证号是{v}。", "身份证号码：{v}", "Resident ID {v} was verified.",
                  "申请人 {v} 已审核。"],
    "id_in_aadhaar": ["My Aadhaar number is {v}.", "Aadhaar: {v}", "आधार संख्या {v} है।",
                      "UID {v} linked to the account."],
    "id_in_pan": ["PAN: {v}", "My PAN card number is {v}.", "Permanent Account Number {v}"],
    "id_jp_my_number": ["マイナンバーは{v}です。", "個人番号：{v}", "My Number: {v}"],
    "id_br_cpf": ["Meu CPF é {v}.", "CPF: {v}", "CPF nº {v} do cliente."],
    "id_br_cnpj": ["CNPJ: {v}", "O CNPJ da empresa é {v}.", "Fornecedor CNPJ {v}."],
    "passport": ["Passport number {v}", "Mon numéro de passeport est {v}.",
                 "Reisepassnummer: {v}", "Número de pasaporte {v}", "护照号码：{v}",
                 "パスポート番号は{v}です。", "Numer paszportu {v}", "Номер паспорта {v}",
                 "Passaporto n. {v}", "여권번호 {v}"],
}
ID_DRAFTS = ["Thanks, the number {v} has been recorded.", "Noted; we will not share it.",
             "I have updated your file with {v}."]

SCRIPT_LOCALES = ("ru_RU", "uk_UA", "el_GR", "ar_AA", "he_IL", "hi_IN", "zh_CN", "ja_JP",
                  "ko_KR", "th_TH", "hy_AM", "ka_GE", "fa_IR", "bg_BG")
NAME_TEMPLATES = ["Write a reply to {name} about the delayed order.",
                  "Customer {name} called twice about the refund.",
                  "Dear {name}, your parcel has shipped.",
                  "Please ask {name} for the signed contract.",
                  "The ticket was opened by {name} yesterday.",
                  "{name} wants to change the delivery date.",
                  "Forward this to {name} and cc the manager."]
NATIVE_TEMPLATES = {
    "ru_RU": "Здравствуйте, {name}! Ваш заказ отправлен.", "uk_UA": "Шановний {name}, дякуємо.",
    "bg_BG": "Уважаеми {name}, благодарим ви.", "el_GR": "Αγαπητέ {name}, η παραγγελία στάλθηκε.",
    "ar_AA": "عزيزي {name}، تم شحن طلبك.", "fa_IR": "سلام {name}، سفارش شما ارسال شد.",
    "he_IL": "שלום {name}, ההזמנה נשלחה.", "hi_IN": "प्रिय {name}, आपका ऑर्डर भेज दिया गया है।",
    "zh_CN": "{name}先生您好，您的订单已发货。", "ja_JP": "{name}様、ご注文ありがとうございます。",
    "ko_KR": "{name}님, 주문이 발송되었습니다.", "th_TH": "เรียนคุณ{name} คำสั่งซื้อถูกจัดส่งแล้ว",
}
TASK_TEMPLATES = ["Explain to {name} why the refund was rejected.",
                  "Draft an apology to {name} for the late delivery.",
                  "Write a thank-you note for {name}, who fixed the outage.",
                  "Summarise the call with {name} in two lines.",
                  "Tell {name} that the contract is ready.",
                  "Ask {name} whether Tuesday works."]
_CYR = dict(zip("abcdefghijklmnopqrstuvwxyz", ["а", "б", "к", "д", "е", "ф", "г", "х", "и", "й",
                                               "к", "л", "м", "н", "о", "п", "к", "р", "с", "т",
                                               "у", "в", "в", "кс", "ы", "з"], strict=True))
_GRK = dict(zip("abcdefghijklmnopqrstuvwxyz", ["α", "μπ", "κ", "ντ", "ε", "φ", "γκ", "χ", "ι",
                                               "τζ", "κ", "λ", "μ", "ν", "ο", "π", "κ", "ρ", "σ",
                                               "τ", "ου", "β", "ου", "ξ", "ι", "ζ"], strict=True))
_HAN_GIVEN = "晓子涵宇轩梓欣怡浩然俊杰思雨嘉琪一鸣志远雅静天佑若曦紫萱博文诗琪"
_HAN_SURNAMES = "王李张刘陈杨赵黄周吴徐孙胡朱高林何郭马罗"
_HANGUL_SURNAMES = "김이박최정강조윤장임"


def _translit(name: str, table: dict[str, str]) -> str:
    words = []
    for word in name.split():
        letters = "".join(table.get(c, "") for c in word.lower())
        words.append(letters[:1].upper() + letters[1:])
    return " ".join(words)


def script_name(rng: random.Random, *, listed: bool) -> tuple[str, str, str]:
    """``(locale, full name, first part)``; listed ones are Faker's, the others made here."""
    if listed:
        locale = rng.choice(SCRIPT_LOCALES)
        fake = _faker(locale, rng)
        first, last = fake.first_name(), fake.last_name()
        if locale in ("zh_CN", "ko_KR"):
            return locale, f"{last}{first}", f"{last}{first}"
        if locale == "ja_JP":
            return locale, f"{last}{first}" if rng.random() < 0.5 else f"{last} {first}", last
        return locale, f"{first} {last}", first
    style = rng.choice(["cyrillic", "greek", "han", "hangul"])
    latin = _faker(rng.choice(["nl_NL", "en_GB", "es_ES", "it_IT"]), rng)
    if style == "cyrillic":
        name = _translit(f"{latin.first_name()} {latin.last_name()}", _CYR)
        return "ru_RU", name, name.split()[0]
    if style == "greek":
        name = _translit(f"{latin.first_name()} {latin.last_name()}", _GRK)
        return "el_GR", name, name.split()[0]
    if style == "han":
        name = rng.choice(_HAN_SURNAMES) + "".join(rng.sample(_HAN_GIVEN, rng.choice([1, 2])))
        return "zh_CN", name, name
    syllables = [chr(0xAC00 + rng.randrange(11172)) for _ in range(2)]
    name = rng.choice(_HANGUL_SURNAMES) + "".join(syllables)
    return "ko_KR", name, name


ADDRESS_LOCALES = ("ja_JP", "zh_TW", "ru_RU", "uk_UA", "de_DE", "fr_FR", "es_ES", "it_IT",
                   "pt_BR", "pl_PL", "nl_NL", "sv_SE", "ko_KR", "pt_PT", "de_AT")
ADDRESS_TEMPLATES = ["Please ship the replacement to {v}.", "Lieferadresse: {v}",
                     "Adresse de livraison : {v}", "Dirección: {v}", "住所：{v}",
                     "The customer moved to {v} last month."]
EMAIL_STYLES = ("{a} . {b} @ {d} . {t}", "{a} at {d} dot {t}", "{a}.{b} [at] {d} [dot] {t}",
                "{a} arroba {d} punto {t}", "{a} (at) {d} (dot) {t}", "{a}_{b} @ {d}.{t}",
                "{a} point {b} arobase {d} point {t}")
EMAIL_TEMPLATES = ["Write to me at {v} please.", "Mi correo es {v}.", "Contact: {v}",
                   "Mon adresse : {v}", "You can reach her on {v} after 5pm."]
PHONE_WORDS = {"en_GB": "zero one two three four five six seven eight nine",
               "es_ES": "cero uno dos tres cuatro cinco seis siete ocho nueve",
               "fr_FR": "zéro un deux trois quatre cinq six sept huit neuf",
               "de_DE": "null eins zwei drei vier fünf sechs sieben acht neun",
               "it_IT": "zero uno due tre quattro cinque sei sette otto nove"}
PHONE_TEMPLATES = {"en_GB": "Call me on {v}.", "es_ES": "Mi móvil es {v}.",
                   "fr_FR": "Mon portable : {v}", "de_DE": "Telefon: {v}",
                   "it_IT": "Il mio cellulare è {v}.", "zh_CN": "电话：{v}",
                   "ja_JP": "電話番号は{v}です。", "pl_PL": "Telefon: {v}", "ru_RU": "Телефон: {v}"}


def _syllable_name(rng: random.Random, syllables: int) -> str:
    """A made-up name ("Ravamesu"): consonant-vowel syllables, capitalized."""
    word = "".join(rng.choice("bdfgklmnprstvyz") + rng.choice("aeiou") for _ in range(syllables))
    return word.capitalize()


def _value(kind: str, rng: random.Random) -> tuple[str, str, list[str]]:
    """``(value, task, drafts)`` for one planted value of ``kind``."""
    if kind in ID_TEMPLATES:
        value = passport_number(rng) if kind == "passport" else national_id(kind, rng)
        if not is_valid_id(kind, value):
            raise AssertionError(f"generated {kind} {value!r} fails its checksum; "
                                 "fix the generator")
        task = rng.choice(ID_TEMPLATES[kind]).format(v=value)
        return value, task, [d.format(v=value) for d in rng.sample(ID_DRAFTS, 2)]
    if kind in ("name_script", "name_script_unlisted"):
        locale, name, first = script_name(rng, listed=kind == "name_script")
        native = NATIVE_TEMPLATES.get(locale)
        template = native if native and rng.random() < 0.35 else rng.choice(NAME_TEMPLATES)
        return name, template.format(name=name), [f"Hello {first}, we are sorry for the delay.",
                                                  f"Dear {name}, the order is on its way."]
    if kind == "name_in_task":
        if rng.random() < 0.5:  # a Faker name, or one made of syllables that no list holds
            fake = _faker(rng.choice(["en_IN", "en_US", "nl_NL", "pt_BR", "de_DE", "it_IT",
                                      "es_MX", "fr_FR", "pl_PL", "tr_TR", "sw", "en_GB"]), rng)
            first, last = fake.first_name(), fake.last_name()
        else:
            first, last = _syllable_name(rng, 3), _syllable_name(rng, 4)
        name = f"{first} {last}"  # the name is in the task only, as reviewers planted it
        return name, rng.choice(TASK_TEMPLATES).format(name=name), [
            "Here is a short, polite message with the update.",
            "The decision was made after a careful review; thank you for your patience."]
    if kind == "address_world":
        value = ", ".join(_faker(rng.choice(ADDRESS_LOCALES), rng).address().splitlines())
        return value, rng.choice(ADDRESS_TEMPLATES).format(v=value), [
            "We have updated the delivery address.", f"Confirmed: {value}."]
    if kind == "spaced_email":
        fake = _faker(rng.choice(["en_US", "es_ES", "fr_FR", "de_DE", "pt_BR"]), rng)
        a, b = (re.sub(r"[^a-z]", "", fake.first_name().lower()) or "ana",
                re.sub(r"[^a-z]", "", fake.last_name().lower()) or "lopez")
        domain, tld = fake.free_email_domain().rsplit(".", 1)
        value = rng.choice(EMAIL_STYLES).format(a=a, b=b, d=domain, t=tld)
        return value, rng.choice(EMAIL_TEMPLATES).format(v=value), [
            "Thanks, we will write to you.", f"We will use {value}."]
    if kind == "spaced_phone":
        locale = rng.choice(sorted(PHONE_TEMPLATES))
        digits = re.sub(r"\D", "", _faker(locale, rng).phone_number())[-10:]
        words = PHONE_WORDS.get(locale, "").split()
        value = (" ".join(words[int(d)] for d in digits) if words and rng.random() < 0.5
                 else " ".join(digits))
        return value, PHONE_TEMPLATES[locale].format(v=value), [
            "We will call you tomorrow.", f"Calling {value} now."]
    raise KeyError(f"unknown kind {kind!r}; use one of {', '.join(KINDS)}")


def planted_records(per_kind: int = 12, seed: int = SEED) -> list[dict[str, Any]]:
    """``per_kind`` records for every kind in :data:`KINDS`, each planting one value."""
    rng = random.Random(seed)
    records = []
    for kind in KINDS:
        for _ in range(per_kind):
            value, task, drafts = _value(kind, rng)
            records.append({"task": task, "drafts": drafts, "final": drafts[-1],
                            "planted": [(kind, value)]})
    return records


def name_words(value: str) -> list[str]:
    """The parts of a planted name that must not survive."""
    return [w for w in value.split() if len(w) > 1 or _UNSPACED.search(w)]


def leaks(kind: str, value: str, outputs: str) -> bool:
    """Whether a planted value (for a name: any of its parts) appears in ``outputs``."""
    if kind in NAME_KINDS:
        for word in name_words(value):
            pattern = (re.escape(word) if _UNSPACED.search(word)
                       else rf"(?<!\w){re.escape(word)}(?!\w)")
            if re.search(pattern, outputs, re.IGNORECASE):
                return True
        return False
    return value in outputs


BENIGN_PLACES = ["東京", "大阪", "北京", "上海", "서울", "부산", "Москва", "Санкт-Петербург",
                 "Αθήνα", "القاهرة", "ירושלים", "मुंबई", "กรุงเทพ", "Buenos Aires", "São Paulo",
                 "Zürich", "Kraków", "Reykjavík", "Ho Chi Minh City", "New Delhi", "Cape Town",
                 "Montréal"]
BENIGN_TEMPLATES = [
    "The flight from {a} to {b} takes about {n} hours.", "Our office in {a} opens at 9:00.",
    "We ship to {a}, {b} and most of Europe.", "Revenue grew {n}% in {a} last quarter.",
]
BENIGN_FIXED = [
    "Version 3.12.4 was released on 2024-10-07; upgrade from 3.11.9.",
    "Commit {h} fixed the race in the scheduler.", "Request {u} timed out after 30 s.",
    "Order {o} shipped on 12/03/2025.", "Tracking number {o} is in transit.",
    "SKU {sku} is back in stock.", "ISBN 978-3-16-148410-0 is the third edition.",
    "Solve 3x + 7 = 22; then x = 5, and 2^10 = 1024.", "The matrix is [[1, 2], [3, 4]].",
    "The total is €1.299,00 or $1,450.50 with tax.", "Build {n}.{n}.{n} ran 1,024 tests in 57.3 s.",
    "The NHS employs about 1.5 million people.", "A passport renewal costs €95 and takes 3 weeks.",
    "Your PESEL and NIE are never stored by this form.", "Call the help desk between 9 and 17.",
    "Port 8080 and 5432 must be open; timeout 30000 ms.",
    "Invoice INV-2024-00417 is due on 2025-01-31.",
    "Мы обновили приложение до версии 2.4, спасибо за терпение.",
    "今日は天気がいいので、公園を散歩しました。", "我们的新产品将在下个月发布，价格为299元。",
    "다음 주 회의는 화요일 오후 3시에 있습니다.", "شكرا لك على رسالتك، سنرد قريبا.",
    "תודה על ההודעה, נחזור אליך בקרוב.", "हम आपके संदेश के लिए धन्यवाद देते हैं।",
    "Ευχαριστούμε για το μήνυμά σας, θα απαντήσουμε σύντομα.", "ขอบคุณสำหรับข้อความของคุณ",
    "Vielen Dank für Ihre Nachricht, wir melden uns bald.", "Merci pour votre message, à bientôt.",
    "Gracias por tu mensaje, te responderemos pronto.", "Grazie per il messaggio, a presto.",
    "Obrigado pela mensagem, responderemos em breve.",
    "Dziękujemy za wiadomość, odpowiemy wkrótce.",
    "Translate 'спасибо', '谢谢' and 'ありがとう' into English.", "The kanji 山 means mountain.",
]


def benign_texts(seed: int = SEED) -> dict[str, list[str]]:
    """Category -> texts with no personal data, made from templates and random values."""
    rng = random.Random(seed)
    places = [t.format(a=rng.choice(BENIGN_PLACES), b=rng.choice(BENIGN_PLACES),
                       n=rng.randint(2, 14)) for t in BENIGN_TEMPLATES for _ in range(4)]
    fixed = [t.format(h="".join(rng.choice("0123456789abcdef") for _ in range(40)),
                      u=uuid.UUID(int=rng.getrandbits(128), version=4),
                      o=_digits(rng, rng.choice([10, 11, 12, 14, 18])),
                      sku=f"{rng.choice(['XK', 'PRD', 'AB'])}-{_digits(rng, 4)}-"
                          f"{rng.choice(['BLK', 'RED', 'L'])}",
                      n=rng.randint(1, 40)) for t in BENIGN_FIXED]
    numbers = [f"Order {_digits(rng, n)} and invoice {_digits(rng, n)} were merged."
               for n in (9, 10, 11, 12, 12, 14, 15, 18)]
    return {"places": places, "mixed": fixed, "numbers": numbers}
