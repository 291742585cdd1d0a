"""The Nexmark data model: people, auctions and bids drawn from one event id.

A line-for-line port of Beam's ``PersonGenerator``, ``AuctionGenerator``, ``BidGenerator``,
``PriceGenerator`` and ``StringsGenerator``. Ids are not counters but functions of the event
id (``last_base0_person_id`` and friends), which is what lets a split generate its events
independently: the person or auction an event refers to is computed, not looked up. Hot
auctions, sellers and bidders are the first member of the latest batch of 100.
"""

from __future__ import annotations

import math
from typing import Any

from nexmark.config import (
    AUCTION_ID_LEAD,
    FIRST_AUCTION_ID,
    FIRST_CATEGORY_ID,
    FIRST_PERSON_ID,
    HOT_AUCTION_RATIO,
    HOT_BIDDER_RATIO,
    HOT_SELLER_RATIO,
    NUM_CATEGORIES,
    PERSON_ID_LEAD,
    NexmarkConfig,
)
from nexmark.javarandom import JavaRandom

PERSON = "person"
AUCTION = "auction"
BID = "bid"

US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond",
             "Seattle", "Kent", "Cheyenne")
FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah",
               "Deiter", "Walter")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones",
              "Noris")
MIN_STRING_LENGTH = 3


def event_type(config: NexmarkConfig, event_id: int) -> str:
    """Beam: ``eventId % 50`` below 1 is a person, below 4 an auction, else a bid."""
    rem = event_id % config.total_proportion
    if rem < config.person_proportion:
        return PERSON
    if rem < config.person_proportion + config.auction_proportion:
        return AUCTION
    return BID


def last_base0_person_id(config: NexmarkConfig, event_id: int) -> int:
    """The (0-based) id of the last person generated at or before ``event_id``."""
    epoch, offset = divmod(event_id, config.total_proportion)
    if offset >= config.person_proportion:
        offset = config.person_proportion - 1
    return epoch * config.person_proportion + offset


def last_base0_auction_id(config: NexmarkConfig, event_id: int) -> int:
    """The (0-based) id of the last auction generated at or before ``event_id``."""
    epoch, offset = divmod(event_id, config.total_proportion)
    if offset < config.person_proportion:
        epoch -= 1  # about to make a person: the last auction of the previous epoch
        offset = config.auction_proportion - 1
    elif offset >= config.person_proportion + config.auction_proportion:
        offset = config.auction_proportion - 1  # about to make a bid
    else:
        offset -= config.person_proportion
    return epoch * config.auction_proportion + offset


def _next_long(random: JavaRandom, n: int) -> int:
    """Beam's ``LongGenerator.nextLong`` (its skewed fallback for huge ranges included)."""
    if n < 2**31 - 1:
        return random.next_int(n)
    return abs(random.next_long()) % n  # = abs(Java's truncating remainder)


def next_base0_person_id(config: NexmarkConfig, event_id: int, random: JavaRandom) -> int:
    """A random active person, plus a few 'leads' (ids not generated yet), as Beam."""
    num_people = last_base0_person_id(config, event_id) + 1
    active = min(num_people, config.num_active_people)
    n = _next_long(random, active + PERSON_ID_LEAD)
    return num_people - active + n


def next_base0_auction_id(config: NexmarkConfig, event_id: int, random: JavaRandom) -> int:
    """A random auction likely still in flight, plus a few 'leads', as Beam."""
    max_auction = last_base0_auction_id(config, event_id)
    min_auction = max(max_auction - config.num_in_flight_auctions, 0)
    return min_auction + _next_long(random, max_auction - min_auction + 1 + AUCTION_ID_LEAD)


def next_price(random: JavaRandom) -> int:
    """Beam's ``PriceGenerator``: ``round(10 ** (6 * u) * 100)`` cents, log-uniform."""
    return math.floor(10.0 ** (random.next_double() * 6.0) * 100.0 + 0.5)


def next_string(random: JavaRandom, max_length: int) -> str:
    length = MIN_STRING_LENGTH + random.next_int(max_length - MIN_STRING_LENGTH)
    chars = []
    for _ in range(length):
        if random.next_int(13) == 0:
            chars.append(" ")
        else:
            chars.append(chr(97 + random.next_int(26)))
    return "".join(chars).strip()


def next_exact_string(random: JavaRandom, length: int) -> str:
    """Beam's ``nextExactString``: Java's truncating ``%`` and ``/`` on a signed int included."""
    chars = []
    rnd = 0
    left = 0
    for _ in range(length):
        if left == 0:
            rnd = random.next_int32()
            left = 6
        digit = int(math.fmod(rnd, 26))
        chars.append(chr(97 + digit))
        rnd = int(rnd / 26)
        left -= 1
    return "".join(chars)


def next_extra(random: JavaRandom, current_size: int, desired_average_size: int) -> str:
    if current_size > desired_average_size:
        return ""
    desired_average_size -= current_size
    delta = math.floor(desired_average_size * 0.2 + 0.5)
    min_size = desired_average_size - delta
    desired = min_size + (0 if delta == 0 else random.next_int(2 * delta))
    return next_exact_string(random, desired)


def next_person(config: NexmarkConfig, event_id: int, random: JavaRandom,
                timestamp: int) -> dict[str, Any]:
    person_id = last_base0_person_id(config, event_id) + FIRST_PERSON_ID
    name = (FIRST_NAMES[random.next_int(len(FIRST_NAMES))] + " "
            + LAST_NAMES[random.next_int(len(LAST_NAMES))])
    email = next_string(random, 7) + "@" + next_string(random, 5) + ".com"
    credit_card = " ".join(f"{random.next_int(10_000):04d}" for _ in range(4))
    city = US_CITIES[random.next_int(len(US_CITIES))]
    state = US_STATES[random.next_int(len(US_STATES))]
    size = 8 + len(name) + len(email) + len(credit_card) + len(city) + len(state)
    return {"id": person_id, "name": name, "email_address": email, "credit_card": credit_card,
            "city": city, "state": state, "date_time": timestamp,
            "extra": next_extra(random, size, config.avg_person_byte_size)}


def _next_auction_length_ms(config: NexmarkConfig, event_number: int, random: JavaRandom,
                            timestamp: int) -> int:
    """Beam: on average the time until ``num_in_flight_auctions`` more auctions exist, so that
    about that many auctions are open at any time."""
    events_for_auctions = (config.num_in_flight_auctions * config.total_proportion
                           // config.auction_proportion)
    future = config.timestamp_for_event(event_number + events_for_auctions)
    horizon = future - timestamp
    return 1 + _next_long(random, max(horizon * 2, 1))


def next_auction(config: NexmarkConfig, event_number: int, event_id: int, random: JavaRandom,
                 timestamp: int) -> dict[str, Any]:
    auction_id = last_base0_auction_id(config, event_id) + FIRST_AUCTION_ID
    if random.next_int(config.hot_sellers_ratio) > 0:
        seller = (last_base0_person_id(config, event_id) // HOT_SELLER_RATIO) * HOT_SELLER_RATIO
    else:
        seller = next_base0_person_id(config, event_id, random)
    seller += FIRST_PERSON_ID
    category = FIRST_CATEGORY_ID + random.next_int(NUM_CATEGORIES)
    initial_bid = next_price(random)
    expires = timestamp + _next_auction_length_ms(config, event_number, random, timestamp)
    item_name = next_string(random, 20)
    description = next_string(random, 100)
    reserve = initial_bid + next_price(random)
    size = 8 + len(item_name) + len(description) + 8 + 8 + 8 + 8 + 8
    return {"id": auction_id, "item_name": item_name, "description": description,
            "initial_bid": initial_bid, "reserve": reserve, "date_time": timestamp,
            "expires": expires, "seller": seller, "category": category,
            "extra": next_extra(random, size, config.avg_auction_byte_size)}


def next_bid(config: NexmarkConfig, event_id: int, random: JavaRandom,
             timestamp: int) -> dict[str, Any]:
    if random.next_int(config.hot_auction_ratio) > 0:
        auction = (last_base0_auction_id(config, event_id) // HOT_AUCTION_RATIO) \
            * HOT_AUCTION_RATIO
    else:
        auction = next_base0_auction_id(config, event_id, random)
    auction += FIRST_AUCTION_ID
    if random.next_int(config.hot_bidders_ratio) > 0:
        # the second person of the batch, so hot bidders and hot sellers differ
        bidder = (last_base0_person_id(config, event_id) // HOT_BIDDER_RATIO) \
            * HOT_BIDDER_RATIO + 1
    else:
        bidder = next_base0_person_id(config, event_id, random)
    bidder += FIRST_PERSON_ID
    price = next_price(random)
    return {"auction": auction, "bidder": bidder, "price": price, "date_time": timestamp,
            "extra": next_extra(random, 32, config.avg_bid_byte_size)}
