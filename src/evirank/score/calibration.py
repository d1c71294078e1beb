"""Calibration pairs for static int8 quantisation: (query, passage) texts written for evirank.

Static quantisation fixes each activation's int8 range before scoring, from the ranges it takes on
a calibration set, so the set should look like what the model will read: a short query against a
sentence or a short passage, some relevant and some not, across topics (science, medicine, news,
technology, everyday questions), with numbers, names and punctuation. These pairs were written
for this purpose; they belong to no test collection. Their digest is part of the cache key and of
the score store's precision name, so a change of the set never mixes scores.

Example:
    >>> len(CALIBRATION_PAIRS) >= 64
    True
    >>> len(calibration_digest())
    64
"""

from __future__ import annotations

import hashlib
import json

CALIBRATION_PAIRS: tuple[tuple[str, str], ...] = (
    (
        "vitamin D supplements reduce the risk of fractures in older adults",
        "In a trial of 2,256 women aged 70 or older, a yearly high dose of vitamin D did not lower the "
        "rate of falls or fractures; the treated group had slightly more of both.",
    ),
    (
        "vitamin D supplements reduce the risk of fractures in older adults",
        "Bone density was measured at the hip and spine by dual-energy X-ray absorptiometry.",
    ),
    (
        "aspirin lowers the risk of a first heart attack",
        "Daily low-dose aspirin reduced non-fatal myocardial infarction by about a fifth, at the cost "
        "of more gastrointestinal bleeding.",
    ),
    (
        "aspirin lowers the risk of a first heart attack",
        "The museum reopened after renovation with a new wing for modern sculpture.",
    ),
    (
        "mutations in BRCA1 increase breast cancer risk",
        "Carriers of pathogenic BRCA1 variants have a lifetime breast cancer risk of roughly 60 to 70 "
        "percent, against about 12 percent in the general population.",
    ),
    (
        "mutations in BRCA1 increase breast cancer risk",
        "DNA repair by homologous recombination requires the resection of double-strand break ends.",
    ),
    (
        "antibiotics are effective against viral infections",
        "Antibiotics act on bacterial structures such as the cell wall and the 70S ribosome, which "
        "viruses do not have.",
    ),
    (
        "antibiotics are effective against viral infections",
        "Prescriptions for acute bronchitis fell by 14% after the clinics introduced delayed prescribing.",
    ),
    (
        "regular exercise improves sleep quality",
        "Participants who walked briskly for 30 minutes a day reported falling asleep faster and "
        "waking less often after twelve weeks.",
    ),
    (
        "regular exercise improves sleep quality",
        "The committee will publish its recommendations on interest rates next Thursday.",
    ),
    (
        "T cells recognise antigens presented by MHC molecules",
        "The T-cell receptor binds a short peptide held in the groove of an MHC class I or class II "
        "molecule on the surface of another cell.",
    ),
    (
        "T cells recognise antigens presented by MHC molecules",
        "Macrophages engulf debris and secrete cytokines such as IL-1 and TNF-alpha.",
    ),
    (
        "smoking during pregnancy lowers birth weight",
        "Infants of mothers who smoked weighed on average 200 g less at birth (95% CI 150-250 g).",
    ),
    (
        "smoking during pregnancy lowers birth weight",
        "Gestational age was estimated from the date of the last menstrual period.",
    ),
    (
        "insulin resistance precedes type 2 diabetes",
        "Years before diagnosis, fasting insulin rose while glucose stayed normal, a sign that tissues "
        "were responding less to insulin.",
    ),
    (
        "insulin resistance precedes type 2 diabetes",
        "The bridge was closed for two days while engineers inspected the cables.",
    ),
    (
        "how do vaccines train the immune system",
        "A vaccine exposes the body to a harmless piece or a weakened form of a pathogen, so B and T "
        "cells learn to recognise it and memory cells remain.",
    ),
    (
        "how do vaccines train the immune system",
        "Cold chain storage keeps most vaccines between 2 and 8 degrees Celsius.",
    ),
    (
        "gut bacteria influence body weight",
        "Germ-free mice colonised with microbiota from obese donors gained more fat than mice given "
        "bacteria from lean donors.",
    ),
    (
        "gut bacteria influence body weight",
        "Stool samples were frozen at -80 C within two hours of collection.",
    ),
    (
        "what causes the seasons on Earth",
        "Earth's axis is tilted about 23.4 degrees, so each hemisphere receives more direct sunlight "
        "during part of the year.",
    ),
    (
        "what causes the seasons on Earth",
        "The distance between Earth and the Sun varies by about 3 percent over the year.",
    ),
    (
        "who invented the printing press",
        "Johannes Gutenberg developed a movable-type printing press in Mainz around 1440.",
    ),
    (
        "who invented the printing press",
        "Paper was made from linen rags until wood pulp became common in the 19th century.",
    ),
    (
        "best way to store fresh basil",
        "Trim the stems and keep basil in a glass of water at room temperature, loosely covered; the "
        "cold of a refrigerator blackens the leaves.",
    ),
    ("best way to store fresh basil", "Tomatoes, basil and mozzarella make the classic insalata caprese."),
    (
        "how to reset a home wifi router",
        "Hold the reset button on the back for 10 seconds until the lights blink, then log in with "
        "the default password printed on the label.",
    ),
    (
        "how to reset a home wifi router",
        "The 5 GHz band is faster but reaches less far through walls than 2.4 GHz.",
    ),
    (
        "python list comprehension syntax",
        "A list comprehension such as [x * x for x in values if x > 0] builds a new list in one expression.",
    ),
    (
        "python list comprehension syntax",
        "The interpreter releases the global lock while waiting for input and output.",
    ),
    (
        "symptoms of iron deficiency",
        "Tiredness, pale skin, shortness of breath and brittle nails are common signs of low iron.",
    ),
    (
        "symptoms of iron deficiency",
        "Spinach contains iron, but much of it is bound to oxalate and poorly absorbed.",
    ),
    (
        "causes of the 2008 financial crisis",
        "Losses on subprime mortgage securities, high leverage at investment banks and the collapse "
        "of Lehman Brothers froze credit markets in 2008.",
    ),
    (
        "causes of the 2008 financial crisis",
        "Central banks in several countries cut interest rates close to zero.",
    ),
    (
        "how long do honey bees live",
        "Worker bees live about five to six weeks in summer, while queens can live for several years.",
    ),
    ("how long do honey bees live", "Beekeepers add supers to the hive when the nectar flow begins."),
    (
        "rules of offside in football",
        "A player is offside if, when the ball is played to them, they are nearer the opponents' goal "
        "line than both the ball and the second-last defender.",
    ),
    (
        "rules of offside in football",
        "The final was played in front of 74,000 spectators and ended 2-1 after extra time.",
    ),
    (
        "electric cars reduce carbon emissions over their lifetime",
        "Over 200,000 km, a battery electric car charged from an average European grid emitted about "
        "a third less CO2 than a comparable petrol car, battery production included.",
    ),
    (
        "electric cars reduce carbon emissions over their lifetime",
        "Charging stations along the motorway are spaced roughly every 60 kilometres.",
    ),
    (
        "does coffee dehydrate you",
        "In moderate amounts coffee counts towards daily fluid intake; its mild diuretic effect is "
        "offset by the water it contains.",
    ),
    ("does coffee dehydrate you", "Arabica beans grow best at altitudes between 1,000 and 2,000 metres."),
    (
        "what is the capital of Australia",
        "Canberra was chosen as the capital in 1908 as a compromise between Sydney and Melbourne.",
    ),
    ("what is the capital of Australia", "Sydney's Opera House opened in 1973."),
    (
        "statins cause muscle pain",
        "In blinded trials, muscle symptoms were reported about as often on placebo as on statins, "
        "suggesting most complaints are not caused by the drug.",
    ),
    ("statins cause muscle pain", "LDL cholesterol fell by 38% in the first year of treatment."),
    (
        "air pollution is linked to dementia",
        "Long-term exposure to fine particulate matter (PM2.5) was associated with a higher incidence "
        "of dementia in a cohort of 130,000 adults.",
    ),
    (
        "air pollution is linked to dementia",
        "The city added 40 kilometres of protected cycle lanes last year.",
    ),
    (
        "how does a transformer model read text",
        "Text is split into tokens, each mapped to a vector; self-attention layers then let every "
        "token's representation draw on all the others.",
    ),
    (
        "how does a transformer model read text",
        "The GPU has 80 GB of memory and a peak of nearly one petaflop in bfloat16.",
    ),
    (
        "neurons in the adult brain can regenerate",
        "New neurons are added to the hippocampus of adult mice throughout life, although evidence "
        "for the same in adult humans is disputed.",
    ),
    (
        "neurons in the adult brain can regenerate",
        "The patient was discharged on day 4 without complications.",
    ),
    (
        "malaria is transmitted by mosquitoes",
        "Plasmodium parasites are carried between people by the bite of infected female Anopheles "
        "mosquitoes.",
    ),
    (
        "malaria is transmitted by mosquitoes",
        "Bed nets treated with insecticide were distributed to 3.1 million households.",
    ),
    (
        "when did the Berlin Wall fall",
        "On 9 November 1989, East German authorities opened the border crossings and crowds began "
        "tearing down the wall.",
    ),
    ("when did the Berlin Wall fall", "Berlin has more bridges than Venice."),
    (
        "high salt intake raises blood pressure",
        "Cutting salt by 4.4 g a day lowered systolic blood pressure by about 5 mmHg in people with "
        "hypertension.",
    ),
    (
        "high salt intake raises blood pressure",
        "Sea salt and table salt contain similar amounts of sodium by weight.",
    ),
    (
        "recipe for simple pancakes",
        "Whisk 200 g flour, 2 eggs, 300 ml milk and a pinch of salt, rest the batter, then fry thin "
        "pancakes in a hot buttered pan.",
    ),
    ("recipe for simple pancakes", "Maple syrup is made by boiling down the sap of sugar maples."),
    (
        "telomere shortening is associated with ageing",
        "Leukocyte telomere length declined by roughly 25 base pairs per year and shorter telomeres "
        "predicted higher mortality.",
    ),
    ("telomere shortening is associated with ageing", "Telomerase adds TTAGGG repeats to chromosome ends."),
    (
        "COVID-19 can be spread by people without symptoms",
        "Contact tracing found that about 40% of transmissions came from people who had no symptoms "
        "at the time.",
    ),
    (
        "COVID-19 can be spread by people without symptoms",
        "The laboratory processed 12,000 PCR tests a day at its peak.",
    ),
)


def calibration_digest(pairs: tuple[tuple[str, str], ...] = CALIBRATION_PAIRS) -> str:
    """sha256 of the calibration pairs (part of a quantised model's cache key and precision name)."""
    return hashlib.sha256(json.dumps(pairs).encode()).hexdigest()
