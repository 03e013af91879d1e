"""Hand-written PII test corpora: planted values by kind, and benign texts that must stay intact.

Shared by the PII tests and ``bench/pii.py``. Every value is invented for
this file (keys are random strings in each provider's format; names,
streets and numbers belong to nobody we know of); each kind comes in
several formats, and the names come from many origins. Nothing here was
tuned against the recognizers: a record states what it plants, the tests
and the benchmark check whether it survives.

``RECORDS``: one dict per run, ``task``, ``drafts`` (the refine rounds) and
``final``, and ``planted``: ``(kind, value)`` pairs, the value as it
appears in the texts. For a ``name``, every part of the value is checked
(whole word, any case), so "Hello Femke" leaks "Femke Janssen".
``BENIGN``: category -> texts with no personal data or credential at all.
"""

from __future__ import annotations

import re
from typing import Any

_AWS_SECRET = "odJFCrnl2edlBDdz1C5Jau2RJtBRnlWmTSHf6pWk"
_AZURE_KEY = ("3NuMGQym/4rWA/gX7cDZPCpofHs23WbnDyphAPxjQ+3IyHRJbLL1u/7Ijqm3fCcwSzf3DpS8ig+/UA4MlXq"
              "A6w==")
_KEY_BODY = "/4gAIqK4+pdEuNb0lCo7pt/LI198F6sXyriJ1RIaKM+t59SQW6PyEXD0fO8WXt/e"
_KEY_BODY2 = "qQm4m6bs0tj8HRYkQWO+eiEKDl3mm4vMdfPhLTV3sF0xvwkWE/sD7G6Gb7Kuj4SM"
_JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1Xzg4NDEyIiwicm9sZSI6ImFkbWluIiwiaWF0Ijox"
        "NzE4MDAwMDAwfQ.BHkuEwjua058LeDKK6jDHz2oCtIsjhvNK4p7MZI_4kf")
_JWT2 = ("eyJhbGciOiJSUzI1NiIsImtpZCI6ImstMjAyNC0wNyJ9.eyJpc3MiOiJodHRwczovL2F1dGguc2hvcGxpbmUuaW8i"
         "LCJhdWQiOiJhcGkiLCJleHAiOjE3NjcyMjU2MDB9.qQm4m6bs0tj8HRYkQWO-eiEKDl3mm4vMdfPhLTV3sF0xvwkW"
         "E_sD7G6Gb7Kuj4SM")
_OPENAI = "sk-2Hkd9Gf2leMeR3pzh84KpLMcNfAQLKHu7qnQTupqziQPtDu7"
_OPENAI_PROJ = ("sk-proj-W7eaDNKgeInGqi7w4e4pxskC1ITtNZPHaQ0Jt7QgT3BlbkFJ84iqh4gVJjrsMnTvnRO2qGF"
                "q562dfOB1rcavXiOq")
_ANTHROPIC = ("sk-ant-api03-u42bojteVs3qfNUfTAFnT0tEuw0dwQ0FIunWe8Cz6SNDCdyZQJiJSZQdoHwHen3SO3oXy"
              "Gf3azU3iQOpMN0PZLqy1WwMZAA")
_STRIPE = ("sk_live_5108WpRtoZmjbcpEN2XeDA4OKmTSyFzpjPSa5W3X4gXBolZ9SHDdJp62hDiZDQHJMu8W5CN0U5GB1"
           "6JC5kV3ECqWp1OrXXHFOpr")
_GH_PAT = ("github_pat_11X272HPOEVB9OOAEDOECV_eGprQFnIiU74KKEpYEZAmggQBwBAD3UdRPPgdzUvZ3gpmmICiBl"
           "rDp37eCZ")
_GCP_JSON = (
    '{"type": "service_account", "project_id": "shop-analytics-4411", '
    '"private_key_id": "6f893697b590481194f309ffea518f32cf214492", '
    '"private_key": "-----BEGIN PRIVATE KEY-----\\n' + _KEY_BODY + '\\n' + _KEY_BODY2
    + '\\n-----END PRIVATE KEY-----\\n", '
    '"client_email": "etl-bot@shop-analytics-4411.iam.gserviceaccount.com"}')


def _record(task: str, drafts: list[str], final: str, planted: list[tuple[str, str]]
            ) -> dict[str, Any]:
    return {"task": task, "drafts": drafts, "final": final, "planted": planted}


RECORDS: list[dict[str, Any]] = [
    # -- credentials ---------------------------------------------------------------------
    _record(f"Why does my script fail? I set OPENAI_API_KEY={_OPENAI_PROJ} and still get 401.",
            ["Check the key: it must be exported in the same shell.",
             f"Your key {_OPENAI_PROJ[:30]}... looks fine; export it again."],
            "Export the variable in the shell that runs the script, then retry.",
            [("secret", _OPENAI_PROJ), ("secret", _OPENAI_PROJ[8:30])]),
    _record("Summarise this config for the on-call engineer:\n"
            f"anthropic:\n  api_key: {_ANTHROPIC}\nopenai:\n  key: \"{_OPENAI}\"",
            [f"Two providers; the OpenAI key is {_OPENAI}.", "Two model providers are set."],
            "Two model providers are configured, each with its own key.",
            [("secret", _ANTHROPIC), ("secret", _OPENAI)]),
    _record("Turn these into environment variables: aws_access_key_id = AKIA5XQ2M7RT9KPL3WZN, "
            f"aws_secret_access_key = {_AWS_SECRET}, region eu-west-1.",
            [f"export AWS_ACCESS_KEY_ID=AKIA5XQ2M7RT9KPL3WZN\nexport AWS_SECRET_ACCESS_KEY="
             f"{_AWS_SECRET}", "export AWS_REGION=eu-west-1"],
            f"export AWS_ACCESS_KEY_ID=AKIA5XQ2M7RT9KPL3WZN\nexport AWS_SECRET_ACCESS_KEY="
            f"{_AWS_SECRET}\nexport AWS_DEFAULT_REGION=eu-west-1",
            [("secret", "AKIA5XQ2M7RT9KPL3WZN"), ("secret", _AWS_SECRET)]),
    _record("The temporary creds ASIAY3K8P2MW6QXR4TLD / LUyifDLkDmWJ6UuVTAIjvFu7WICPhDeOZIiBOB+Y "
            "from our AWS STS call expired; explain why.",
            ["Session credentials from STS expire after their duration."],
            "STS session credentials expire; request new ones with a longer duration.",
            [("secret", "ASIAY3K8P2MW6QXR4TLD"),
             ("secret", "LUyifDLkDmWJ6UuVTAIjvFu7WICPhDeOZIiBOB+Y")]),
    _record(f"Is this service account file safe to commit? {_GCP_JSON}",
            ["No: it holds a private key.", f"No. The key id {_GCP_JSON[80:120]} identifies it."],
            "Never commit it: revoke the key and store the file in a secret manager.",
            [("secret", "6f893697b590481194f309ffea518f32cf214492"), ("secret", _KEY_BODY),
             ("secret", _KEY_BODY2),
             ("email", "etl-bot@shop-analytics-4411.iam.gserviceaccount.com")]),
    _record("Restrict this Maps key: AIza6sHrFH2ZUCr-lgotu2iXW7GboIRoL3u6aHw (used on "
            "shopline.io).",
            ["Add an HTTP referrer restriction for shopline.io to "
             "AIza6sHrFH2ZUCr-lgotu2iXW7GboIRoL3u6aHw."],
            "In the console, add an HTTP referrer restriction for shopline.io.",
            [("secret", "AIza6sHrFH2ZUCr-lgotu2iXW7GboIRoL3u6aHw")]),
    _record("Fix the upload: DefaultEndpointsProtocol=https;AccountName=contosodata7;AccountKey="
            f"{_AZURE_KEY};EndpointSuffix=core.windows.net",
            ["The connection string looks valid; check the container name.",
             "Use the SAS URL https://contosodata7.blob.core.windows.net/exports?sv=2022-11-02"
             "&ss=b&srt=co&sp=rl&se=2025-12-31T00:00:00Z&sig=3PGdlDcIfw84Jx3+l8S0QPnuQ0/KZe6lOG"
             "PoZa70gyU%3D instead."],
            "Ocp-Apim-Subscription-Key: 27df7ffe0297c79bfbdabe898736a356 is for the vision API; "
            "the storage error is the container name.",
            [("secret", _AZURE_KEY), ("secret", "3PGdlDcIfw84Jx3+l8S0QPnuQ0/KZe6lOGPoZa70gyU%3D"),
             ("secret", "27df7ffe0297c79bfbdabe898736a356")]),
    _record("CI cannot clone: git remote uses ghp_G6g3Ot1OGMmjxWkI9X7H6aMuFbh7x41Ztpdp and the "
            f"deploy step uses {_GH_PAT}.",
            ["Rotate ghp_G6g3Ot1OGMmjxWkI9X7H6aMuFbh7x41Ztpdp: classic tokens expire.",
             "The OAuth token gho_4K8ffUF0eWIXiiQE8JkqH3MB9n7IWUSmTtzQ lacks the repo scope."],
            "Give the fine-grained token read access to the repository and retry.",
            [("secret", "ghp_G6g3Ot1OGMmjxWkI9X7H6aMuFbh7x41Ztpdp"), ("secret", _GH_PAT),
             ("secret", "gho_4K8ffUF0eWIXiiQE8JkqH3MB9n7IWUSmTtzQ")]),
    _record("Write a .netrc line for gitlab.com with token glpat-lJ5F7WRd-Px_BTHRJJby.",
            ["machine gitlab.com login oauth2 password glpat-lJ5F7WRd-Px_BTHRJJby"],
            "machine gitlab.com login oauth2 password glpat-lJ5F7WRd-Px_BTHRJJby",
            [("secret", "glpat-lJ5F7WRd-Px_BTHRJJby")]),
    _record("Our bot posts nothing. SLACK_BOT_TOKEN=xoxb-967054668893-7346706562729-"
            "Ib6zLKQbfPBi3DldqyunDuvW, user token xoxp-646417080531-003309232719-3745299124190-"
            "3660c1d3db575c4a79d758e7f2987241.",
            ["Invite the bot to the channel first."],
            "Invite the bot to the channel and give it the chat:write scope.",
            [("secret", "xoxb-967054668893-7346706562729-Ib6zLKQbfPBi3DldqyunDuvW"),
             ("secret", "xoxp-646417080531-003309232719-3745299124190-"
                        "3660c1d3db575c4a79d758e7f2987241")]),
    _record(f"Refunds fail with {_STRIPE}; the restricted key rk_live_51CeTsprvu5IfijoSjTneAAvID"
            "Adn1Ay5XL8Sb24W works.",
            ["The restricted key lacks the refunds permission."],
            "Grant the restricted key write access to refunds.",
            [("secret", _STRIPE), ("secret", "rk_live_51CeTsprvu5IfijoSjTneAAvIDAdn1Ay5XL8Sb24W")]),
    _record("huggingface-cli login fails with hf_J1atsnBYLMPuDCCRnGEY59YVkQfsGQONvf, why?",
            ["The token hf_J1atsnBYLMPuDCCRnGEY59YVkQfsGQONvf is read-only; uploads need write."],
            "Create a token with write access and log in again.",
            [("secret", "hf_J1atsnBYLMPuDCCRnGEY59YVkQfsGQONvf")]),
    _record(f"Decode this header for me: Authorization: Bearer {_JWT}",
            [f"The token {_JWT2} is signed with RS256.", "It is an HS256 token for user u_88412."],
            "It is an HS256 JWT whose payload names a subject and a role.",
            [("secret", _JWT), ("secret", _JWT2)]),
    _record("Why does ssh refuse this key?\n-----BEGIN OPENSSH PRIVATE KEY-----\n"
            "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
            "QyNTUxOQAAACBv8fKq2Lm9XzR4tW7yH1jF6gD0sA5eU2iO9kR4tVbXNwAAAJgk3Lq9JNy6\n"
            "-----END OPENSSH PRIVATE KEY-----",
            ["Its permissions are too open: chmod 600 the file.",
             "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3xq7Lm2Pz9Kw4Rv8Nt1Yc6Hb5Jg0Fd2Se7Ui"
             "3Oa\n-----END RSA PRIVATE KEY-----"],
            "Run chmod 600 on the key file; ssh ignores keys others can read.",
            [("secret", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"),
             ("secret", "QyNTUxOQAAACBv8fKq2Lm9XzR4tW7yH1jF6gD0sA5eU2iO9kR4tVbXNwAAAJgk3Lq9JNy6"),
             ("secret", "MIIEpAIBAAKCAQEA3xq7Lm2Pz9Kw4Rv8Nt1Yc6Hb5Jg0Fd2Se7Ui3Oa")]),
    _record("Connect with postgres://app_user:Tr0ub4dor%26x@db.internal:5432/shop and "
            "mongodb+srv://admin:Wint3r-is-c0ming@cluster0.x1y2z.mongodb.net/test",
            ["Clone https://deploy:gh7Qm2xPz@git.example.org/shop.git first."],
            "Both URLs carry passwords; move them to environment variables.",
            [("secret", "Tr0ub4dor%26x"), ("secret", "Wint3r-is-c0ming"), ("secret", "gh7Qm2xPz")]),
    _record("Review this settings file: SECRET_KEY = 'django-insecure-8xk2m9lp4qw7zn3bc8yh1jf6gd0'"
            "\napi_token = \"phJWAMMYNoXHyC6Ct3LBtKNdN9Vg8WnO\"",
            ["The secret key must come from the environment.",
             "my password is Sunflower#2024 and the passphrase: correct-horse-battery-9"],
            "Read SECRET_KEY and api_token from the environment, never from the file.",
            [("secret", "django-insecure-8xk2m9lp4qw7zn3bc8yh1jf6gd0"),
             ("secret", "phJWAMMYNoXHyC6Ct3LBtKNdN9Vg8WnO"), ("secret", "Sunflower#2024"),
             ("secret", "correct-horse-battery-9")]),
    # -- names, addresses, contacts -------------------------------------------------------
    _record("Write a short polite reply to Femke Janssen (femke.janssen@ziggo.nl) about her "
            "parcel to Keizersgracht 221-B, 1015 CJ Amsterdam.",
            ["Dear Femke, your parcel is on its way.", "Hello Femke, sorry for the delay."],
            "Dear Ms. Janssen, your parcel to Amsterdam left our depot today.",
            [("name", "Femke Janssen"), ("email", "femke.janssen@ziggo.nl"),
             ("address", "Keizersgracht 221-B, 1015 CJ Amsterdam")]),
    _record("Reply to Chukwuemeka Okonkwo, who wrote from c.okonkwo@yahoo.com and asks us to "
            "call 0803 456 7812 about order 55120.",
            ["Dear Mr. Okonkwo, we will call you today.", "Hi Chukwuemeka, thanks for writing."],
            "Dear Mr. Okonkwo, a colleague will call you this afternoon about order 55120.",
            [("name", "Chukwuemeka Okonkwo"), ("email", "c.okonkwo@yahoo.com"),
             ("phone", "0803 456 7812")]),
    _record("Draft a thank-you note from Aarav Mehta to the hotel at 12 MG Road, Indiranagar, "
            "Bengaluru 560038.",
            ["Hello team, Aarav here: thank you for a lovely stay.",
             "Hello Aarav, Mehta here: thanks for the stay."],
            "Dear staff, thank you for a wonderful stay. Warm regards, Aarav Mehta",
            [("name", "Aarav Mehta"), ("address", "12 MG Road, Indiranagar, Bengaluru 560038")]),
    _record("Compose a reminder to Kim Min-jun (+82 10 4827 1936) and Park Seo-yeon about "
            "Friday's review.",
            ["Hi Min-jun, a reminder about Friday.", "Dear Seo-yeon, the review is on Friday."],
            "Hello Min-jun and Seo-yeon, a reminder: our review is this Friday at 10.",
            [("name", "Kim Min-jun"), ("name", "Park Seo-yeon"), ("phone", "+82 10 4827 1936")]),
    _record("summarise the complaint from emily johnson, 742 Evergreen Terrace, Springfield, "
            "OR 97403, phone (541) 555-0132",
            ["emily johnson says the kettle leaks.", "The customer reports a leaking kettle."],
            "Ms. Johnson reports that her new kettle leaks at the base.",
            [("name", "emily johnson"), ("address",
                                         "742 Evergreen Terrace, Springfield, OR 97403"),
             ("phone", "(541) 555-0132")]),
    _record("Answer Oluwaseun Adeyemi: he can't log in. His email is oluwaseun dot adeyemi at "
            "gmail dot com and his number is oh eight oh three, four five six, seven eight one "
            "two.",
            ["Dear Oluwaseun, please reset your password.", "Hello Mr. Adeyemi, try a reset."],
            "Dear Mr. Adeyemi, please use the reset link; it expires in an hour.",
            [("name", "Oluwaseun Adeyemi"),
             ("obfuscated_email", "oluwaseun dot adeyemi at gmail dot com"),
             ("spelled_phone", "oh eight oh three, four five six, seven eight one two")]),
    _record("Write to Priya Raghunathan at priya.r@infosys.co.in; her IBAN is "
            "GB29 NWBK 6016 1331 9268 19 and the refund is 120 GBP.",
            ["Dear Dr. Raghunathan, the refund is on its way.", "Hi Priya, refund sent."],
            "Dear Dr. Raghunathan, 120 GBP will reach your account within three days.",
            [("name", "Priya Raghunathan"), ("email", "priya.r@infosys.co.in"),
             ("iban", "GB29 NWBK 6016 1331 9268 19")]),
    _record("Tell Daan de Vries that the courier will come to Hauptstraße 5, 10115 Berlin, "
            "and that he can reach us on +31 6 12345678.",
            ["Hello Daan, de Vries here? No: Dear Mr. de Vries, the courier comes Monday."],
            "Dear Mr. de Vries, the courier will come on Monday morning.",
            [("name", "Daan de Vries"), ("address", "Hauptstraße 5, 10115 Berlin"),
             ("phone", "+31 6 12345678")]),
    _record("Letter for Ngozi Eze: send the replacement to 221B Baker Street, London NW1 6XE; "
            "she paid with 4111 1111 1111 1111.",
            ["Dear Ngozi, your replacement ships today.", "Hi Ngozi Eze, shipping now."],
            "Dear Ms. Eze, your replacement is on its way to London.",
            [("name", "Ngozi Eze"), ("address", "221B Baker Street, London NW1 6XE"),
             ("card", "4111 1111 1111 1111")]),
    _record("Reply to hyejin.choi (at) naver (dot) com: Choi Hye-jin asks whether 서울특별시 "
            "강남구 테헤란로 152 is inside the delivery zone.",
            ["Dear Hye-jin, yes, Gangnam is covered.", "Hello Ms. Choi, it is covered."],
            "Dear Ms. Choi, 강남구 is inside our delivery zone.",
            [("name", "Choi Hye-jin"), ("obfuscated_email", "hyejin.choi (at) naver (dot) com"),
             ("address", "서울특별시 강남구 테헤란로 152")]),
    _record("Write an apology to Tomasz Wiśniewski, ul. Marszałkowska 84, 00-514 Warszawa; "
            "card 5555-5555-5555-4444 was charged twice.",
            ["Dear Tomasz, we are sorry for the double charge.",
             "Dear Mr. Wiśniewski, the second charge will be reversed."],
            "Dear Mr. Wiśniewski, we have reversed the duplicate charge.",
            [("name", "Tomasz Wiśniewski"), ("card", "5555-5555-5555-4444")]),
    _record("Answer João Pereira (joao_pereira88@outlook.com.br): is 1600 Pennsylvania Avenue NW, "
            "Washington, DC 20500 a valid billing address?",
            ["Olá João, the address format is valid.", "Hello João, yes it is valid."],
            "Hello Mr. Pereira, that address is in a valid US format.",
            [("name", "João Pereira"), ("email", "joao_pereira88@outlook.com.br"),
             ("address", "1600 Pennsylvania Avenue NW, Washington, DC 20500")]),
    _record("Nguyen Thi Lan called from 203.0.113.45 and asked for a callback at "
            "zero nine one two, three four five, six seven eight.",
            ["Dear Ms. Nguyen, we will call you back.", "Hi Lan, a callback is booked."],
            "Dear Ms. Nguyen, a callback is booked for tomorrow morning.",
            [("name", "Nguyen Thi Lan"), ("ip", "203.0.113.45"),
             ("spelled_phone", "zero nine one two, three four five, six seven eight")]),
    _record("Grace Mwangi asks us to send the invoice to Flat 2, 14 Mill Lane, Leeds LS6 2QE "
            "and to NL91ABNA0417164300 for the refund.",
            ["Dear Grace, the invoice is attached.", "Hello Ms. Mwangi, invoice attached."],
            "Dear Ms. Mwangi, the invoice is attached and the refund is on its way.",
            [("name", "Grace Mwangi"), ("address", "Flat 2, 14 Mill Lane, Leeds LS6 2QE"),
             ("iban", "NL91ABNA0417164300")]),
    _record("Help Siobhán Murphy write to her landlord at 8 rue de la Paix, 75002 Paris; her "
            "mobile is +44 7911 482036 and her email siobhan.murphy@eircom.net.",
            ["Dear Sir or Madam, I am writing about the heating. Regards, Siobhán Murphy"],
            "Dear Sir or Madam, the heating has failed again. Kind regards, Siobhán Murphy",
            [("name", "Siobhán Murphy"), ("address", "8 rue de la Paix, 75002 Paris"),
             ("phone", "+44 7911 482036"), ("email", "siobhan.murphy@eircom.net")]),
    _record("Babatunde Olatunji from 198.51.100.23 wants his SSN 536-90-4471 removed from "
            "our records; write the confirmation.",
            ["Dear Mr. Olatunji, your SSN has been removed.", "Hi Babatunde, done."],
            "Dear Mr. Olatunji, we have deleted the number from our records.",
            [("name", "Babatunde Olatunji"), ("ip", "198.51.100.23"), ("ssn", "536-90-4471")]),
    _record("Translate for Lakshmi Venkataraman: the package for 45 Queen's Road, Kowloon "
            "arrives Monday. Her number: +91 98765 43210.",
            ["Lakshmi, your package arrives Monday.", "Dear Ms. Venkataraman, Monday it is."],
            "Dear Ms. Venkataraman, your package arrives on Monday.",
            [("name", "Lakshmi Venkataraman"), ("address", "45 Queen's Road, Kowloon"),
             ("phone", "+91 98765 43210")]),
]

BENIGN: dict[str, list[str]] = {
    "instructions": [
        "Summarise the attached meeting notes in three bullet points.",
        "Write a haiku about autumn leaves.", "Draft a polite out-of-office message.",
        "Translate 'good morning' into French and German.",
        "Rewrite this paragraph in plain English for a ten-year-old.",
        "Compose a two-line slogan for a bakery that opens at dawn.",
        "Outline the steps to replace a bicycle tyre.",
        "Classify each review as positive, negative or neutral.",
        "Proofread the following sentence: their going to the market tomorrow.",
        "Explain recursion with a short example.", "List five synonyms for happy.",
        "Condense the release notes to one sentence.",
    ],
    "greetings": [
        "Hi team, the stand-up moves to 10:30 tomorrow.",
        "Dear customer, thank you for your order.", "Hello everyone, welcome aboard!",
        "Dear Sir or Madam, I am writing about my subscription.",
        "Dear Hiring Manager, please find my application attached.",
        "Thanks, everyone, for a great quarter.", "Best, The Support Team",
        "Hi there, how can we help today?",
    ],
    "code": [
        "def get_user(user_id: int) -> User:\n    return db.session.get(User, user_id)",
        "api_key = os.environ['API_KEY']  # never hard-code it",
        "for i in range(10):\n    total += prices[i] * 1.2",
        "SELECT order_id, total FROM orders WHERE created_at > '2024-01-01';",
        "const token = await getToken(); // refreshed every 15 minutes",
        "password_hash = bcrypt.hashpw(password.encode(), bcrypt.gensalt())",
        "git commit -m 'fix: retry on 429' && git push origin main",
        "docker run -p 8080:80 nginx:1.25-alpine",
    ],
    "dates_versions": [
        "Version 2.4.1 shipped on 2024-05-01 after two release candidates.",
        "Python 3.11.7 and transformers 5.19.0 are required.",
        "The meeting is on March 3rd, 2025 at 14:00 CET.",
        "Upgrade from v1.13.2 to v2.0.0-rc.3 before 15/04/2025.",
        "Commit 9a54b78 reverted the change from build 4471.",
    ],
    "identifiers": [
        "ISBN 978-0-306-40615-7 is the second edition.",
        "Order #A-10293 shipped; ticket ORD-7781-KX is closed.",
        "SKU-4471-BLK is out of stock until PO-2024-00417 arrives.",
        "Incident INC0012345 was linked to JIRA-2231.",
        "Request id 550e8400-e29b-41d4-a716-446655440000 timed out.",
        "The tracking number 1Z 999 AA1 01 2345 6784 was updated.",
    ],
    "prices_numbers": [
        "The total is $19.99 plus £4.50 shipping, or €1.250,00 for the bulk order.",
        "12 * 7 = 84, and 144 / 12 = 12.", "The stadium holds 81,044 people.",
        "Set the timeout to 30000 ms and retry 3 times.",
        "Population grew from 8,336,817 to 8,804,190 between 2019 and 2020.",
    ],
    "products": [
        "The iPhone 15 Pro and the Galaxy S24 both support USB-C.",
        "My ThinkPad X1 Carbon runs Ubuntu 24.04 LTS.",
        "Ask Alexa to play jazz, or use the Kindle Paperwhite for reading.",
        "The Jordan 1 sneakers sold out in an hour.",
        "PostgreSQL 16 and Redis 7 run in the same Kubernetes cluster.",
    ],
    "places": [
        "Paris is lovely in spring, when the chestnut trees bloom along the Seine.",
        "Lagos traffic is famous; the Third Mainland Bridge is often jammed.",
        "We hiked Mount Kilimanjaro and then flew to Zanzibar.",
        "Meet me at Victoria Station by the clock.",
        "Seoul and Busan are connected by a fast train.",
        "The Rhine flows through Basel, Strasbourg and Cologne.",
    ],
    "secrets_talk": [
        "The API key is stored in Vault and rotated every 90 days.",
        "Your password must be at least 12 characters long.",
        "The secret to good bread is time.", "The key is to stay calm under pressure.",
        "The token limit is 4096 for this model.",
        "Click the password reset link we emailed you.",
    ],
}


def name_words(value: str) -> list[str]:
    """The parts of a planted name that must not survive (particles like "de" excepted)."""
    return [w for w in value.split() if w.lower() not in ("de", "van", "der", "thi")]


def leaks(kind: str, value: str, outputs: str) -> bool:
    """Whether a planted value (for a name: any of its parts) appears in ``outputs``."""
    if kind == "name":
        return any(re.search(rf"(?<!\w){re.escape(w)}(?!\w)", outputs, re.IGNORECASE)
                   for w in name_words(value))
    return value in outputs

#: Written after the recognizers were tuned on RECORDS and run once, unchanged: the bench
#: reports it apart, as the honest estimate for text the rules were not fitted to.
HELD_OUT: list[dict[str, Any]] = [
    _record("Can you tidy this .env? OPENAI_KEY=sk-proj-Hn5Tz2Qw8Kx1Lm7Pv4Rb9Cs3Dy6Fg0Jh2Uk5Io8"
            "Ea1Wr4 and ANTHROPIC=sk-ant-admin01-Lk8Jh7Gf6Ds5Ap4Oi3Uy2Tr1Ew0Qz9Xm8Cn7Vb6-Az5Sx4AA",
            ["Sorted alphabetically: ANTHROPIC, OPENAI_KEY."], "Both keys are present; quote "
            "neither in chat.",
            [("secret", "sk-proj-Hn5Tz2Qw8Kx1Lm7Pv4Rb9Cs3Dy6Fg0Jh2Uk5Io8Ea1Wr4"),
             ("secret", "sk-ant-admin01-Lk8Jh7Gf6Ds5Ap4Oi3Uy2Tr1Ew0Qz9Xm8Cn7Vb6-Az5Sx4AA")]),
    _record("Boto3 says InvalidClientTokenId for key AKIAZP4N7Q2LX8RM3TWK with secret "
            "kT7vQ2xN9mB4wR8zL1cY6hP3jD5fG0sA2eU7iO4p.",
            ["Check that the secret kT7vQ2xN9mB4wR8zL1cY6hP3jD5fG0sA2eU7iO4p has no spaces."],
            "Recreate the access key pair in IAM and update the profile.",
            [("secret", "AKIAZP4N7Q2LX8RM3TWK"),
             ("secret", "kT7vQ2xN9mB4wR8zL1cY6hP3jD5fG0sA2eU7iO4p")]),
    _record("Pipeline log: 'Authenticating with github_pat_11AQW3ZKY0rT5uI8oP2aS_dF6gH9jK1lZ4xC7"
            "vB0nM3qW6eR9tY2uI5oP8aS1dF4gH7jK0lZ3xC6vB9nM2q' then pushing with "
            "hf_Wq4Er7Ty1Ui5Op8As2Df6Gh9Jk3Lz0Xc.",
            ["Both tokens authenticated."], "The push succeeded after authentication.",
            [("secret", "github_pat_11AQW3ZKY0rT5uI8oP2aS_dF6gH9jK1lZ4xC7vB0nM3qW6eR9tY2uI5oP8aS1d"
                        "F4gH7jK0lZ3xC6vB9nM2q"),
             ("secret", "hf_Wq4Er7Ty1Ui5Op8As2Df6Gh9Jk3Lz0Xc")]),
    _record("redis://:Blu3-Harb0r!x@cache.prod.local:6379/0 times out and "
            "amqp://mq_user:Pr1sm.Lake44@rabbit.local/ too; why?",
            ["Probably a firewall between the pods."], "Check the network policy between pods.",
            [("secret", "Blu3-Harb0r!x"), ("secret", "mq_user:Pr1sm.Lake44")]),
    _record("Write a reply to Wanjiru Kamau (wanjiru.kamau@safaricom.co.ke) confirming delivery "
            "to 17 Ngong Road, Nairobi 00100.",
            ["Hello Wanjiru, your order is confirmed.", "Dear Ms. Kamau, delivery confirmed."],
            "Dear Ms. Kamau, your delivery to Nairobi is confirmed for Thursday.",
            [("name", "Wanjiru Kamau"), ("email", "wanjiru.kamau@safaricom.co.ke"),
             ("address", "17 Ngong Road, Nairobi 00100")]),
    _record("please answer yoon seo-jin, who lives at 88 Olympic-ro, Songpa-gu, Seoul and can be "
            "reached on 010 2233 4455",
            ["hi seo-jin, thanks for writing", "Dear Ms. Yoon, thank you."],
            "Dear Ms. Yoon, thank you for your message; we will reply by Friday.",
            [("name", "yoon seo-jin"), ("address", "88 Olympic-ro, Songpa-gu, Seoul"),
             ("phone", "010 2233 4455")]),
    _record("Apology to Adaeze Nwachukwu: her card 4012 8888 8888 1881 was declined twice. "
            "Her email is adaeze dot n at protonmail dot com.",
            ["Dear Adaeze, we are sorry.", "Hello Ms. Nwachukwu, apologies."],
            "Dear Ms. Nwachukwu, we are sorry your card was declined; please try again.",
            [("name", "Adaeze Nwachukwu"), ("card", "4012 8888 8888 1881"),
             ("obfuscated_email", "adaeze dot n at protonmail dot com")]),
    _record("Hans-Peter Vogel from Lindenallee 42, 50968 Köln wants a callback on "
            "+49 221 4788 3310.",
            ["Sehr geehrter Herr Vogel, we will call.", "Hi Hans-Peter, callback booked."],
            "Dear Mr. Vogel, a colleague will call you tomorrow.",
            [("name", "Hans-Peter Vogel"), ("address", "Lindenallee 42, 50968 Köln"),
             ("phone", "+49 221 4788 3310")]),
    _record("Summarise Rahul Deshpande's ticket: he is at 203.0.113.77, IBAN "
            "DE75 5121 0800 1245 1261 99, phone seven seven three, five five five, zero one "
            "nine eight.",
            ["Rahul reports a failed transfer.", "Mr. Deshpande reports a failed transfer."],
            "Mr. Deshpande's transfer failed; the bank will retry it.",
            [("name", "Rahul Deshpande"), ("ip", "203.0.113.77"),
             ("iban", "DE75 5121 0800 1245 1261 99"),
             ("spelled_phone", "seven seven three, five five five, zero one nine eight")]),
    _record("Hello, Mateus Oliveira here. Send the documents to Rua Augusta 1500, São Paulo, "
            "please.",
            ["Olá Mateus, documents sent.", "Dear Mr. Oliveira, the documents are on the way."],
            "Dear Mr. Oliveira, the documents were sent today.",
            [("name", "Mateus Oliveira"), ("address", "Rua Augusta 1500")]),
]
