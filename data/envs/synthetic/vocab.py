"""Word lists the synthetic tool family is sampled from: things, their measured attributes and
units, category sets, record names, verbs per operation, and questions no tool answers."""
from __future__ import annotations

# things a family of APIs can be about (none is a built-in domain's subject)
NOUNS = [
    "aquarium", "orchard", "vineyard", "greenhouse", "warehouse", "reservoir", "bridge", "tunnel",
    "observatory", "museum", "library branch", "lighthouse", "wind turbine", "solar farm", "dam",
    "canal lock", "ferry", "tram", "cable car", "glacier", "volcano", "cave", "hiking trail",
    "campsite", "marina", "harbor crane", "cargo ship", "satellite", "telescope", "beehive",
    "bakery", "brewery", "factory line", "printing press", "data center", "server rack",
    "cooling tower", "water tower", "substation", "pipeline segment", "mine shaft", "quarry",
    "sawmill", "stadium", "arena", "theater", "concert hall", "gallery", "school", "clinic",
    "pharmacy", "ambulance", "fire station", "post office", "parcel locker", "delivery van",
    "bus route", "train car", "locomotive", "hangar", "drone", "robot arm", "forklift",
    "shipping container", "freezer unit", "boiler", "heat pump", "elevator", "parking garage",
    "charging station", "bike dock", "sailboat", "ski lift", "ice rink", "swimming pool",
    "sports field", "golf course", "zoo enclosure", "aviary", "fish farm", "seed bank",
    "herbarium", "meteorite", "asteroid", "research vessel", "buoy", "tide gauge", "river gauge",
    "seismometer", "air sensor", "soil probe", "radio mast", "fiber link", "vending machine",
    "food truck", "sculpture", "manuscript", "pipe organ", "game server", "rowing club",
]

# quantity -> attribute names, units (symbol -> (factor, offset) from the base unit, the first),
# the base value range and decimals shown
QUANTITIES: dict[str, dict] = {
    "length": {"attrs": ["height", "length", "width", "depth", "elevation"],
               "units": {"m": (1.0, 0.0), "ft": (3.28084, 0.0)}, "range": (2, 400), "dp": 1},
    "distance": {"attrs": ["range", "route length", "coverage radius"],
                 "units": {"km": (1.0, 0.0), "mi": (0.621371, 0.0)}, "range": (1, 900), "dp": 1},
    "mass": {"attrs": ["weight", "load limit", "payload"],
             "units": {"kg": (1.0, 0.0), "lb": (2.20462, 0.0)}, "range": (5, 9000), "dp": 1},
    "temperature": {"attrs": ["operating temperature", "core temperature"],
                    "units": {"C": (1.0, 0.0), "F": (1.8, 32.0)}, "range": (-20, 90), "dp": 1},
    "volume": {"attrs": ["volume", "tank capacity"],
               "units": {"L": (1.0, 0.0), "gal": (0.264172, 0.0)}, "range": (10, 50000), "dp": 1},
    "money": {"attrs": ["price", "annual budget", "daily fee", "maintenance cost"],
              "units": {"USD": (1.0, 0.0), "EUR": (0.92, 0.0), "GBP": (0.79, 0.0)},
              "range": (20, 90000), "dp": 2},
    "duration": {"attrs": ["age", "service life"],
                 "units": {"years": (1.0, 0.0), "months": (12.0, 0.0)}, "range": (1, 80), "dp": 0},
    "speed": {"attrs": ["top speed", "wind limit"],
              "units": {"km/h": (1.0, 0.0), "mph": (0.621371, 0.0)}, "range": (5, 300), "dp": 1},
    "area": {"attrs": ["floor area", "footprint"],
             "units": {"m2": (1.0, 0.0), "ft2": (10.7639, 0.0)}, "range": (20, 20000), "dp": 1},
    "power": {"attrs": ["power output", "power draw"],
              "units": {"kW": (1.0, 0.0), "hp": (1.34102, 0.0)}, "range": (1, 5000), "dp": 1},
    "count": {"attrs": ["capacity", "staff count", "visitor count", "member count"],
              "units": {}, "range": (2, 900), "dp": 0},
    "percent": {"attrs": ["occupancy", "efficiency", "uptime"],
                "units": {}, "range": (10, 100), "dp": 1},
}
UNIT_WORDS = {"m": "metres", "ft": "feet", "km": "kilometres", "mi": "miles", "kg": "kilograms",
              "lb": "pounds", "C": "degrees Celsius", "F": "degrees Fahrenheit", "L": "litres",
              "gal": "US gallons", "USD": "US dollars", "EUR": "euros", "GBP": "British pounds",
              "years": "years", "months": "months", "km/h": "kilometres per hour",
              "mph": "miles per hour", "m2": "square metres", "ft2": "square feet",
              "kW": "kilowatts", "hp": "horsepower", "": "", "%": "percent"}

# category parameter name -> its values
CATEGORIES: dict[str, list[str]] = {
    "region": ["north", "south", "east", "west", "central"],
    "size": ["small", "medium", "large"],
    "tier": ["bronze", "silver", "gold", "platinum"],
    "zone": ["urban", "rural", "coastal", "mountain"],
    "access": ["public", "private", "shared"],
    "status_class": ["standard", "priority", "legacy"],
}

FIRST = ["Amber", "Birch", "Cedar", "Delta", "Ember", "Falcon", "Granite", "Harbor", "Iris",
         "Juniper", "Kestrel", "Linden", "Maple", "Onyx", "Pine", "Quartz", "Raven", "Sable",
         "Tidal", "Umber", "Willow", "Yarrow", "Zephyr", "Aspen", "Basalt", "Cobalt", "Dune",
         "Fern", "Garnet", "Hazel", "Indigo", "Jasper", "Lark", "Moss", "Nova", "Opal", "Quill",
         "Rowan", "Slate", "Thistle", "Violet", "Wren"]
SECOND = ["Point", "Ridge", "Hollow", "Bay", "Crossing", "Field", "Hill", "Landing", "Meadow",
          "Park", "Reach", "Springs", "Vale", "Wharf", "Yard", "Gate", "Brook", "Cove"]

# operation -> verbs a tool of that operation may start with
VERBS = {
    "find": ["find", "lookup", "search", "resolve"],
    "get": ["get", "fetch", "read", "query", "retrieve"],
    "list": ["list", "browse", "enumerate"],
    "count": ["count", "tally"],
    "total": ["sum", "total", "aggregate"],
    "create": ["create", "schedule", "book", "open", "file", "submit"],
}
# what a create tool makes, and the prefix of its tickets
OBJECTS = {"inspection": "INS", "service request": "SRQ", "booking": "BKG", "work order": "WO",
           "reservation": "RSV", "audit": "AUD"}
TAGS = ["urgent", "safety", "quarterly", "follow-up", "paint", "electrical", "roof", "audit",
        "night", "weekend", "vip", "backup"]

# actions no tool of the family performs (irrelevance: the tools are about the thing, not this)
UNSUPPORTED = [("Delete the {noun} {id} from the registry.", "delete a {noun}"),
               ("Rename the {noun} {id} to '{new}'.", "rename a {noun}"),
               ("Transfer the {noun} {id} to a new owner named {person}.",
                "change the owner of a {noun}"),
               ("Send the maintenance history of the {noun} {id} to {person} by email.",
                "send email"),
               ("Print a paper label for the {noun} {id}.", "print labels")]
PEOPLE = ["Ana Ruiz", "Ken Ito", "Lea Berg", "Omar Haddad", "Priya Nair", "Sam Okafor"]

# questions that need no tool at all, with a correct short answer
OFF_TOPIC = [
    ("What is the capital of Japan?", "The capital of Japan is Tokyo."),
    ("How many legs does a spider have?", "A spider has eight legs."),
    ("What is the chemical symbol for gold?", "The chemical symbol for gold is Au."),
    ("Who wrote the play 'Romeo and Juliet'?", "'Romeo and Juliet' was written by William "
                                               "Shakespeare."),
    ("What is the plural of 'mouse'?", "The plural of 'mouse' is 'mice'."),
    ("Give me a synonym for 'happy'.", "A synonym for 'happy' is 'joyful'."),
    ("Translate 'thank you' into Spanish.", "'Thank you' in Spanish is 'gracias'."),
    ("Which planet is known as the Red Planet?", "Mars is known as the Red Planet."),
    ("What is the largest ocean on Earth?", "The Pacific Ocean is the largest ocean on Earth."),
    ("How many continents are there?", "There are seven continents."),
    ("What gas do plants take in from the air to make food?",
     "Plants take in carbon dioxide to make food by photosynthesis."),
    ("Write a one-line greeting for a birthday card.",
     "Happy birthday! Wishing you a year full of joy and good surprises."),
    ("Suggest a title for a short story about a lost key.",
     "How about \"The Key That Found Its Way Home\"?"),
    ("What is the opposite of 'ancient'?", "The opposite of 'ancient' is 'modern'."),
    ("In which language was the word 'kindergarten' borrowed from?",
     "'Kindergarten' was borrowed from German."),
    ("What do bees make?", "Bees make honey and beeswax."),
    ("Name a primary colour.", "Red is a primary colour."),
    ("How many minutes are in an hour?", "There are 60 minutes in an hour."),
    ("Give me a tip for remembering names.",
     "Repeat a person's name once while talking to them; saying it aloud helps it stick."),
]
WORDS = ["harbor", "lantern", "meadow", "quartz", "violet", "compass", "timber", "glacier",
         "pocket", "saddle", "thunder", "orchid", "pebble", "canyon", "whistle"]
