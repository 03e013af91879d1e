"""PII beyond English: national IDs, passports, non-Latin names, world addresses, spelled contacts.

Every ID below is checked with python-stdnum first, so a test can only pass
on a number that really is valid; each recognizer is also shown leaving
the same number with a wrong check digit, and benign lookalikes.
"""

from __future__ import annotations

import importlib

import pytest
from distill_helpers import make_run
from pii_corpus_world import KINDS, benign_texts, is_valid_id, leaks, planted_records

from agentic_loop.distill.data.pii.addresses import find_addresses
from agentic_loop.distill.data.pii.gate import NATIONAL_ID_ENTITIES, PiiGate
from agentic_loop.distill.data.pii.gazetteer import is_place
from agentic_loop.distill.data.pii.names import find_names
from agentic_loop.distill.data.pii.national_ids import find_national_ids
from agentic_loop.distill.data.pii.obfuscated import find_spelled_emails, find_spelled_phones
from agentic_loop.distill.data.pii.recognizers import context_regex
from agentic_loop.distill.data.pii.script_names import find_script_names
from agentic_loop.distill.data.redact import redact_runs, run_texts


@pytest.fixture(scope="module")
def gate() -> PiiGate:
    return PiiGate("regex")


# entity, corpus kind (for the stdnum check), valid value, a sentence with its context word
IDS = [
    ("DE_TAX_ID", "id_de_tax", "45778913601", "Meine Steuer-ID lautet {v}."),
    ("DE_ID_CARD", "id_de_card", "N3L06PR74", "Personalausweisnummer {v}"),
    ("FR_NIR", "id_fr_nir", "1 17 07 03 190 054 87", "Mon numéro de sécurité sociale : {v}"),
    ("IT_FISCAL_CODE", "id_it_cf", "CRCNNS72A29D818H", "Il mio codice fiscale è {v}."),
    ("ES_NIF", "id_es_dni", "90454325V", "Mi DNI es {v}."),
    ("ES_NIE", "id_es_nie", "X4276031D", "NIE: {v}"),
    ("PL_PESEL", "id_pl_pesel", "48041883237", "Mój PESEL to {v}."),
    ("UK_NINO", "id_uk_nino", "NM757310B", "National Insurance number {v}"),
    ("UK_NHS", "id_uk_nhs", "885 855 6402", "My NHS number is {v}."),
    ("CN_RIC", "id_cn_ric", "440305195009183038", "我的身份证号是{v}。"),
    ("IN_AADHAAR", "id_in_aadhaar", "2973 6622 1150", "Aadhaar: {v}"),
    ("IN_PAN", "id_in_pan", "FPKPR7899S", "PAN card {v}"),
    ("JP_MY_NUMBER", "id_jp_my_number", "054219687705", "マイナンバーは{v}です。"),
    ("BR_CPF", "id_br_cpf", "181.613.256-00", "Meu CPF é {v}."),
    ("BR_CNPJ", "id_br_cnpj", "05.536.248/0001-95", "CNPJ {v}"),
]
#: Weak formats (a bare run of digits) need their context word; strong ones do not.
WEAK = {"DE_TAX_ID", "DE_ID_CARD", "PL_PESEL", "UK_NHS", "IN_AADHAAR", "JP_MY_NUMBER"}


def _wrong_check(value: str) -> str:
    """The same number with its last digit (or letter) changed: the checksum fails."""
    last = value[-1]
    if last.isdigit():
        return value[:-1] + str((int(last) + 1) % 10)
    return value[:-1] + ("A" if last != "A" else "B")


@pytest.mark.parametrize(("entity", "kind", "value", "template"), IDS, ids=[i[0] for i in IDS])
def test_a_valid_national_id_is_redacted_and_a_wrong_check_digit_is_not(
        gate: PiiGate, entity: str, kind: str, value: str, template: str) -> None:
    assert is_valid_id(kind, value), "the test's own number must be valid"
    text = template.format(v=value)
    result = gate.anonymize(text)
    assert value not in (result.text or "") and f"<{entity}>" in (result.text or ""), result
    wrong = _wrong_check(value)
    if entity not in ("UK_NINO", "IN_PAN"):  # a NINO and a PAN have no check digit
        assert not is_valid_id(kind, wrong)
        assert [e for _, _, e in find_national_ids(template.format(v=wrong))
                if e == entity] == []


@pytest.mark.parametrize(("entity", "kind", "value", "template"), IDS, ids=[i[0] for i in IDS])
def test_weak_formats_need_a_context_word_strong_ones_do_not(
        entity: str, kind: str, value: str, template: str) -> None:
    found = [e for _, _, e in find_national_ids(f"Reference {value} was archived.")]
    assert (entity in found) == (entity not in WEAK), found


def test_every_id_entity_is_redacted_by_default(gate: PiiGate) -> None:
    assert set(NATIONAL_ID_ENTITIES) <= set(gate.entities)
    assert {e for e, *_ in IDS} | {"PASSPORT"} == set(NATIONAL_ID_ENTITIES) - {"NL_BSN"}


@pytest.mark.parametrize("text", [
    "Commit 9a54b78c2d1e0f3a4b5c6d7e8f901234567890ab reverted it.",
    "Request 550e8400-e29b-41d4-a716-446655440000 timed out.",
    "ISBN 978-3-16-148410-0, version 2.4.10, released 2024-05-01.",
    "Order ORD-2973-6622-1150 and SKU AB-1234-BLK shipped.",
    "Invoice 2973662211500 is due; the build took 123456 ms.",
    "Use hello2024x or table1234c as the test user names.",
    "The NHS has 1.5 million staff; a passport renewal costs €95.",
])
def test_benign_lookalikes_are_no_ids(text: str) -> None:
    assert find_national_ids(text) == []


@pytest.mark.parametrize("text", [
    "Passport number 603283662", "Mon numéro de passeport est 12AB34567.",
    "Reisepassnummer: C01X00T47", "Número de pasaporte PAA123456", "护照号码：E12345678",
    "パスポート番号はTK1234567です。", "Numer paszportu AB1234567", "Номер паспорта 75 1234567",
    "여권번호 M12345678",
])
def test_passport_numbers_in_context_in_many_languages(text: str) -> None:
    assert [e for _, _, e in find_national_ids(text)] == ["PASSPORT"]


def test_passport_words_alone_or_ids_alone_are_not_passports() -> None:
    for text in ["Passport renewals take 3 weeks since 2019.", "Serial TK1234567 shipped.",
                 "passport holder 12 34", "Reisepass gültig bis 2031"]:
        assert find_national_ids(text) == [], text


@pytest.mark.parametrize(("text", "names"), [
    ("Write to Дмитрий Соколов about the delay.", ["Дмитрий Соколов"]),
    ("Уважаемый Иван Петрович, заказ отправлен.", ["Иван Петрович"]),
    ("Reply to Иванову Ольге Сергеевне today.", ["Иванову Ольге Сергеевне"]),
    ("Αγαπητέ Γιώργο Παπαδόπουλε, ευχαριστούμε.", ["Γιώργο Παπαδόπουλε"]),
    ("عزيزي محمد العلي، تم شحن طلبك.", ["محمد العلي"]),
    ("प्रिय राहुल शर्मा, आपका ऑर्डर भेज दिया गया है।", ["राहुल शर्मा"]),
    ("尊敬的李娜女士：您好", ["李娜"]),
    ("王伟先生您好，您的订单已发货。", ["王伟"]),
    ("田中太郎様、ご注文ありがとうございます。", ["田中太郎"]),
    ("김민준님, 주문이 발송되었습니다.", ["김민준"]),
    ("เรียนคุณสมชาย ใจดี คำสั่งซื้อถูกจัดส่งแล้ว", ["สมชาย ใจดี"]),
    ("Please reply to マリア・ガルシア today.", ["マリア・ガルシア"]),
    ("Customer 王小明 asked for a refund.", ["王小明"]),
])
def test_names_in_non_latin_scripts(text: str, names: list[str]) -> None:
    assert [text[s:e] for s, e in find_script_names(text)] == names


@pytest.mark.parametrize("text", [
    "Москва — столица России; мы живём в Москве.", "我住在北京，工作在上海。",
    "감사합니다. 다음 주 회의는 화요일입니다.", "Translate 'спасибо' and '谢谢' into English.",
    "The train from 東京 to 大阪 takes 2.5 hours.", "Flights to Москва are cancelled.",
    "ขอบคุณสำหรับข้อความของคุณ", "תודה על ההודעה, נחזור אליך בקרוב.",
])
def test_ordinary_text_and_places_in_other_scripts_are_no_names(text: str) -> None:
    assert find_script_names(text) == []


def test_a_full_name_in_the_task_text_is_found_without_a_list(gate: PiiGate) -> None:
    text = "Explain to Priyanka Ramaswamy why the refund was rejected."
    assert gate.anonymize(text).text == "Explain to <PERSON> why the refund was rejected."
    made_up = "Tell Ravamesu Kolidanu it is ready."
    assert [made_up[s:e] for s, e, _ in find_names(made_up)] == ["Ravamesu Kolidanu"]
    for benign in ["Welcome to New York", "Talk to Google Cloud support", "Thanks to Hugging Face",
                   "He flew to Buenos Aires", "Send it to Microsoft Teams", "My NINO is ready"]:
        assert find_names(benign) == [], benign


@pytest.mark.parametrize(("text", "address"), [
    ("〒150-0002 東京都渋谷区渋谷2丁目21-1 まで", "〒150-0002 東京都渋谷区渋谷2丁目21-1"),
    ("上海市浦东新区世纪大道100号", "上海市浦东新区世纪大道100号"),
    ("25979 橫山大安路978號之6", "25979 橫山大安路978號之6"),
    ("Адрес: ул. Тверская, д. 7, кв. 12, Москва, 125009",
     "ул. Тверская, д. 7, кв. 12, Москва, 125009"),
    ("ul. Marszałkowska 10/12, 00-590 Warszawa", "ul. Marszałkowska 10/12, 00-590 Warszawa"),
    ("Calle Mayor, 5, 28013 Madrid", "Calle Mayor, 5, 28013 Madrid"),
    ("Rua Augusta, 1500 - Consolação", "Rua Augusta, 1500 - Consolação"),
    ("Konrad-Adenauer-Straße 12, 53113 Bonn", "Konrad-Adenauer-Straße 12, 53113 Bonn"),
    ("Drottninggatan 12, 111 51 Stockholm", "Drottninggatan 12, 111 51 Stockholm"),
    ("1-2-3 Shibuya, Shibuya-ku, Tokyo 150-0002", "1-2-3 Shibuya, Shibuya-ku, Tokyo 150-0002"),
])
def test_addresses_outside_the_us_and_uk(text: str, address: str) -> None:
    assert [text[s:e] for s, e in find_addresses(text)] == [address]


def test_numbers_in_cjk_text_are_no_addresses() -> None:
    for text in ["価格は3,000円です。2024年5月1日に発売。", "第3章第2節", "地铁2号线很挤",
                 "铁路2号线", "東京都に住んでいます。"]:
        assert find_addresses(text) == [], text


def test_emails_written_with_spaces_or_words_in_several_languages() -> None:
    text = ("ana . lopez @ example . com; jean point dupont arobase orange point fr; "
            "luis arroba gmail punto com; ana.lopez at gmail.com")
    assert [text[s:e] for s, e in find_spelled_emails(text)] == [
        "ana . lopez @ example . com", "jean point dupont arobase orange point fr",
        "luis arroba gmail punto com", "ana.lopez at gmail.com"]
    for benign in ["I work at amazon.com", "Ends here. Then at noon. com",
                   "version 1.2 at example.com"]:
        assert find_spelled_emails(benign) == [], benign


def test_phones_spelled_in_other_languages_or_spaced_digit_by_digit(gate: PiiGate) -> None:
    text = "llama al seis uno dos, tres cuatro cinco, seis siete ocho"
    assert [text[s:e] for s, e in find_spelled_phones(text)] == [text[9:]]
    for phone in ["mi móvil es 6 1 2 3 4 5 6 7 8", "电话：138 0013 8000", "Telefon: 0151 23456789"]:
        assert gate.anonymize(phone).entities == ("PHONE_NUMBER",), phone
    for benign in ["Order 4383322926 and invoice 1675965112 were merged.",
                   "Build 39.39.39 passed.", "Call 2024-05-01 at 10"]:
        assert gate.anonymize(benign).text == benign


def test_a_value_found_once_is_removed_wherever_the_run_repeats_it(gate: PiiGate) -> None:
    run = make_run("My Aadhaar number is 2973 6622 1150, passport E12345678.",
                   [("I updated your file with 297366221150.", 5.0),
                    ("Noted E12345678 and 2973-6622-1150.", 6.0)], final_score=9.0)
    out = redact_runs([run], gate)
    joined = "\n".join(t for _, t in run_texts(out.kept[0]))
    assert "2973" not in joined and "E12345678" not in joined, joined
    # found once in the task; repeated in both drafts and the final output (the best draft)
    assert out.report.redactions["IN_AADHAAR"] == 1 + 3
    assert out.report.recognizers["record_propagation"] == 3 + 2


def test_context_words_and_places() -> None:
    rx = context_regex(["pesel", "paszport"])
    assert rx.search("Numer paszportu") and rx.search("PESEL:") and not rx.search("peselx")
    assert is_place("Buenos Aires") and is_place("서울") and not is_place("Priyanka Ramaswamy")


def test_generated_ids_are_valid_and_the_check_can_fail() -> None:
    records = planted_records(per_kind=3, seed=7)
    assert {r["planted"][0][0] for r in records} == set(KINDS)
    for record in records:
        kind, value = record["planted"][0]
        if kind.startswith("id_"):
            assert is_valid_id(kind, value), (kind, value)
            if kind not in ("id_uk_nino", "id_in_pan"):
                assert not is_valid_id(kind, _wrong_check(value)), (kind, value)
    assert importlib.import_module("stdnum.fr.nir").is_valid("1 17 07 03 190 054 87")


def test_the_regex_gate_on_a_corpus_it_was_not_tuned_on(gate: PiiGate) -> None:
    """Generated with a seed the rules were never run on (the bench uses seed 29).

    Bound: 90% of planted values removed, at most one benign text in 40 changed
    (98% and none when this was written).
    """
    records = planted_records(per_kind=4, seed=2029)
    runs = [make_run(r["task"], [(d, 5.0) for d in r["drafts"]], final=r["final"],
                     final_score=9.0) for r in records]
    kept = {run.id: run for run in redact_runs(runs, gate).kept}
    leaked = []
    for record, run in zip(records, runs, strict=True):
        out = kept.get(run.id)
        joined = "\n".join(t for _, t in run_texts(out)) if out else ""
        leaked += [(k, v) for k, v in record["planted"] if out is None or leaks(k, v, joined)]
    assert len(leaked) <= len(records) // 10, leaked
    texts = [t for group in benign_texts(seed=2029).values() for t in group]
    changed = [(t, r.text) for t, r in zip(texts, gate.anonymize_many(texts), strict=True)
               if r.text != t]
    assert len(changed) <= len(texts) // 40, changed


def test_the_spacy_gate_keeps_the_rules_names_and_drops_foreign_phrases() -> None:
    """spaCy's small model misses "Priyanka Ramaswamy" and calls "Vielen Dank" or a Cyrillic
    name with its verb a person; the vetted recognizer keeps the rules' findings either way."""
    spacy_gate = PiiGate("spacy")
    texts = ["Explain to Priyanka Ramaswamy why the refund was rejected.",
             "Forward this to Рубен Феррндиз and cc the manager.",
             "Vielen Dank für Ihre Nachricht, wir melden uns bald.",
             "We ship to Buenos Aires and Montréal."]
    out = [r.text for r in spacy_gate.anonymize_many(texts)]
    assert out[0] == "Explain to <PERSON> why the refund was rejected."
    assert out[1] == "Forward this to <PERSON> and cc the manager."
    assert "<PERSON>" not in (out[2] or "") and "<PERSON>" not in (out[3] or ""), out
