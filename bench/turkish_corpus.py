"""1,000 realistic Turkish campaign texts (40 to 300 characters), made from a fixed seed.

Names, prices, dates and the RET (opt-out) instruction İYS requires, in the shapes
Turkish retailers, banks and clinics send them. One text in twenty writes the lira sign
``₺`` and one in thirty a circumflex (``kâr``, ``imkân``), which no Turkish table has:
those go as UCS-2 whatever is chosen. Run it to
print the corpus, one text a line; :func:`corpus` is what the benchmarks read.
"""

from __future__ import annotations

import random

SEED = 20261204
SIZE = 1000

FIRST = ["Ayşe", "Fatma", "Emine", "Hatice", "Zeynep", "Elif", "Şule", "Gülşen", "Özge",
         "Çiğdem", "Büşra", "İrem", "Mehmet", "Mustafa", "Ahmet", "Ali", "Hüseyin", "İbrahim",
         "Şükrü", "Çağrı", "Oğuz", "Ümit", "Barış", "Gökhan", "Kağan", "Ilgın", "Doğan"]
LAST = ["Yılmaz", "Kaya", "Demir", "Şahin", "Çelik", "Yıldız", "Yıldırım", "Öztürk", "Aydın",
        "Özdemir", "Arslan", "Doğan", "Kılıç", "Aslan", "Çetin", "Kara", "Koç", "Kurt", "Özkan",
        "Şimşek", "Güneş", "Akın", "Erdoğan", "Ünal", "Işık"]
BRANDS = ["ModaKent", "Çiçek Evi", "Güneş Market", "ŞıkGiyim", "Özel Klinik Sağlık",
          "Yıldız Elektronik", "Kitapçı Dünyası", "İstanbul Optik", "Ağaç Mobilya"]
MONTHS = ["Ocak", "Şubat", "Mart", "Nisan", "Mayıs", "Haziran", "Temmuz", "Ağustos", "Eylül",
          "Ekim", "Kasım", "Aralık"]
PRODUCTS = ["kışlık montlarda", "ayakkabılarda", "tüm ürünlerde", "seçili çantalarda",
            "beyaz eşyada", "çocuk giyiminde", "gözlük çerçevelerinde", "koltuk takımlarında",
            "kışlık botlarda", "akıllı telefonlarda"]
GREETINGS = ["Sayın {name},", "Merhaba {first},", "Değerli müşterimiz {name},",
             "{first} Hanım/Bey,", "Sevgili {first},"]
OFFERS = [
    "{product} %{pct} indirim başladı!",
    "{product} {pct}% indirim fırsatını kaçırmayın.",
    "sepette ek %{pct} indirim sizi bekliyor.",
    "{price} TL ve üzeri alışverişlerde kargo ücretsiz.",
    "{product} 2. ürün 1 TL! Stoklarla sınırlıdır.",
    "size özel {price} TL hediye çeki hesabınıza tanımlandı.",
    "randevunuz {day} {month} {hour}:{minute} için onaylanmıştır.",
    "siparişiniz kargoya verildi, takip no: {track}.",
    "üyeliğinize özel puanlarınız {day} {month} tarihine kadar geçerlidir.",
    "kampanya {day} {month} akşamına kadar tüm mağazalarımızda geçerlidir.",
]
LIRA_OFFERS = ["{product} sadece {price}₺!", "{price}₺ üzeri alışverişe hediye çeki."]
EXTRAS = [
    "Detaylar: www.ornek.com.tr/kampanya",
    "Mağazalarımızda ve uygulamamızda geçerlidir.",
    "Sorularınız için 0850 123 45 67.",
    "Kampanya koşulları için sitemizi ziyaret edin.",
    "Ödeme kapıda, taksit imkanıyla.",
    "İyi alışverişler dileriz.",
    "Geç kalmayın, fırsatlar tükenmeden gelin!",
]
CIRCUMFLEX = ["Kâr payı oranları için şubemize danışın.", "Taksit imkânı sunulmaktadır."]
RET = ["RET yazıp {short}'a gönderin.", "İptal için RET yazıp {short}'e SMS gönderin.",
       "SMS almak istemiyorsanız RET yazıp {short}'a gönderebilirsiniz.",
       "Ret: {short}", "B{code} RET {short}"]


def _text(rng: random.Random) -> str:
    first, last = rng.choice(FIRST), rng.choice(LAST)
    fill = {
        "name": f"{first} {last}", "first": first, "product": rng.choice(PRODUCTS),
        "pct": rng.choice([10, 15, 20, 25, 30, 40, 50, 70]),
        "price": rng.choice(["99,90", "149", "250", "1.299,90", "500", "75"]),
        "day": rng.randint(1, 28), "month": rng.choice(MONTHS),
        "hour": f"{rng.randint(8, 20):02d}", "minute": rng.choice(["00", "15", "30", "45"]),
        "track": f"{rng.randint(10**9, 10**10 - 1)}", "short": rng.choice(["4609", "3505"]),
        "code": rng.randint(100, 999),
    }
    offers = LIRA_OFFERS if rng.random() < 0.05 else OFFERS
    pieces = [rng.choice(BRANDS) + ":" if rng.random() < 0.5 else "",
              rng.choice(GREETINGS), rng.choice(offers)]
    if rng.random() < 1 / 30:
        pieces.append(rng.choice(CIRCUMFLEX))
    target = rng.randint(40, 300)
    extras = rng.sample(EXTRAS, len(EXTRAS))
    ret = rng.choice(RET)
    while extras and len(" ".join(p for p in pieces if p)) + 30 < target:
        pieces.append(extras.pop())
    pieces.append(ret)
    text = " ".join(p for p in pieces if p).format(**fill)
    if len(text) > 300:  # too long: drop extras until it fits
        while len(text) > 300 and len(pieces) > 4:
            pieces.pop(-2)
            text = " ".join(p for p in pieces if p).format(**fill)
    return text[:300]


def corpus(size: int = SIZE, seed: int = SEED) -> list[str]:
    """The texts, always the same for the same seed."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < size:
        text = _text(rng)
        if len(text) >= 40:
            out.append(text)
    return out


if __name__ == "__main__":
    for line in corpus():
        print(line)
