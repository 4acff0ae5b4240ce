"""The hand-written sentences behind ``data/translation_eval`` (written for this course).

Each entry is (German source, three English reference translations, a fourth independent
English translation). The fourth translation is held out of the references: it is the "human"
system of the data set, and the noisy systems are made from it (see ``dataset.py``).
"""

from __future__ import annotations

SENTENCES: tuple[tuple[str, tuple[str, str, str], str], ...] = (
    (
        "Der Zug nach Berlin hat heute zwanzig Minuten Verspätung.",
        (
            "The train to Berlin is twenty minutes late today.",
            "Today the train to Berlin is running twenty minutes behind schedule.",
            "The Berlin train has a delay of twenty minutes today.",
        ),
        "Today's train to Berlin is delayed by twenty minutes.",
    ),
    (
        "Meine Schwester arbeitet seit drei Jahren in einem Krankenhaus.",
        (
            "My sister has worked in a hospital for three years.",
            "My sister has been working at a hospital for three years.",
            "For three years my sister has had a job in a hospital.",
        ),
        "My sister has been employed at a hospital for the past three years.",
    ),
    (
        "Kannst du mir bitte das Salz reichen?",
        (
            "Can you pass me the salt, please?",
            "Could you please hand me the salt?",
            "Would you pass the salt, please?",
        ),
        "Please could you pass me the salt?",
    ),
    (
        "Das Museum ist montags geschlossen.",
        (
            "The museum is closed on Mondays.",
            "On Mondays the museum is closed.",
            "The museum does not open on Mondays.",
        ),
        "The museum is shut every Monday.",
    ),
    (
        "Wir haben gestern Abend einen sehr guten Film gesehen.",
        (
            "We saw a very good film last night.",
            "Last night we watched a really good movie.",
            "Yesterday evening we saw a very good film.",
        ),
        "We watched a very good movie yesterday evening.",
    ),
    (
        "Der Arzt sagt, dass ich mehr Wasser trinken sollte.",
        (
            "The doctor says that I should drink more water.",
            "According to the doctor, I should drink more water.",
            "The doctor says I ought to drink more water.",
        ),
        "The doctor tells me I should be drinking more water.",
    ),
    (
        "Die Preise für Lebensmittel sind im letzten Jahr stark gestiegen.",
        (
            "Food prices have risen sharply over the last year.",
            "The prices of food rose steeply last year.",
            "Over the past year, food prices have gone up a lot.",
        ),
        "Prices for groceries increased strongly in the last year.",
    ),
    (
        "Es wird morgen im Norden regnen.",
        (
            "It will rain in the north tomorrow.",
            "Tomorrow there will be rain in the north.",
            "It is going to rain in the north tomorrow.",
        ),
        "Rain is expected in the north tomorrow.",
    ),
    (
        "Ich habe meinen Schlüssel im Büro vergessen.",
        (
            "I have left my key at the office.",
            "I forgot my key in the office.",
            "I left my key behind at the office.",
        ),
        "I forgot my keys at work.",
    ),
    (
        "Die Kinder spielen im Garten, während es noch hell ist.",
        (
            "The children are playing in the garden while it is still light.",
            "The kids are playing in the garden while it's still light out.",
            "While it is still daylight, the children play in the garden.",
        ),
        "The children play in the yard while it is still bright.",
    ),
    (
        "Der neue Laptop ist leichter und schneller als der alte.",
        (
            "The new laptop is lighter and faster than the old one.",
            "The new laptop weighs less and is quicker than the old one.",
            "Compared with the old laptop, the new one is lighter and faster.",
        ),
        "The new notebook is lighter and faster than the previous one.",
    ),
    (
        "Bitte schalten Sie Ihr Telefon während der Vorstellung aus.",
        (
            "Please switch off your phone during the performance.",
            "Please turn off your telephone during the show.",
            "Kindly switch your phone off during the performance.",
        ),
        "Please turn your phone off for the duration of the performance.",
    ),
    (
        "Wir treffen uns um acht Uhr vor dem Kino.",
        (
            "We will meet at eight o'clock in front of the cinema.",
            "We're meeting at eight outside the cinema.",
            "Let's meet in front of the movie theater at eight.",
        ),
        "We meet at eight o'clock outside the cinema.",
    ),
    (
        "Die Brücke wurde im Jahr 1890 gebaut.",
        (
            "The bridge was built in 1890.",
            "The bridge was constructed in the year 1890.",
            "The bridge dates from 1890.",
        ),
        "The bridge was built in the year 1890.",
    ),
    (
        "Er spricht drei Sprachen fließend, aber er kann nicht kochen.",
        (
            "He speaks three languages fluently, but he cannot cook.",
            "He is fluent in three languages but can't cook.",
            "He speaks three languages fluently; cooking, however, he cannot do.",
        ),
        "He is fluent in three languages, but he does not know how to cook.",
    ),
    (
        "Das Restaurant an der Ecke hat die beste Pizza der Stadt.",
        (
            "The restaurant on the corner has the best pizza in town.",
            "The corner restaurant serves the best pizza in the city.",
            "The best pizza in town is at the restaurant on the corner.",
        ),
        "The restaurant at the corner has the city's best pizza.",
    ),
    (
        "Nach dem Regen war die Luft frisch und kühl.",
        (
            "After the rain the air was fresh and cool.",
            "Following the rain, the air was cool and fresh.",
            "The air felt fresh and cool after the rain.",
        ),
        "After the rainfall the air was crisp and cool.",
    ),
    (
        "Die Firma will im nächsten Jahr hundert neue Mitarbeiter einstellen.",
        (
            "The company wants to hire a hundred new employees next year.",
            "Next year the firm plans to take on one hundred new staff.",
            "The company intends to recruit 100 new workers next year.",
        ),
        "The company aims to hire one hundred new employees next year.",
    ),
    (
        "Ich lese gern Bücher über Geschichte.",
        (
            "I like reading books about history.",
            "I enjoy reading history books.",
            "I like to read books on history.",
        ),
        "I am fond of reading books about history.",
    ),
    (
        "Der Flughafen liegt etwa dreißig Kilometer von der Stadt entfernt.",
        (
            "The airport is about thirty kilometres from the city.",
            "The airport lies roughly thirty kilometers outside the city.",
            "The airport is located around 30 km away from town.",
        ),
        "The airport is approximately thirty kilometres away from the city.",
    ),
    (
        "Sie hat die Prüfung beim ersten Versuch bestanden.",
        (
            "She passed the exam on her first attempt.",
            "She passed the test the first time she took it.",
            "On her first try, she passed the examination.",
        ),
        "She passed the exam at the first attempt.",
    ),
    (
        "Kinder unter zwölf Jahren dürfen nicht allein schwimmen.",
        (
            "Children under twelve are not allowed to swim alone.",
            "Children younger than twelve may not swim on their own.",
            "Kids under the age of twelve must not swim alone.",
        ),
        "Children below the age of twelve are not permitted to swim by themselves.",
    ),
    (
        "Das Konzert war ausverkauft, deshalb sind wir zu Hause geblieben.",
        (
            "The concert was sold out, so we stayed at home.",
            "The concert had sold out, which is why we stayed home.",
            "Since the concert was sold out, we remained at home.",
        ),
        "The concert was sold out, so we stayed home.",
    ),
    (
        "Diese Pflanze braucht viel Sonne und wenig Wasser.",
        (
            "This plant needs a lot of sun and little water.",
            "This plant requires plenty of sunlight and not much water.",
            "This plant needs lots of sun but only a little water.",
        ),
        "This plant needs much sunshine and little water.",
    ),
    (
        "Der Bus fährt alle zehn Minuten vom Bahnhof ab.",
        (
            "The bus leaves the station every ten minutes.",
            "Buses depart from the station every ten minutes.",
            "There is a bus from the station every ten minutes.",
        ),
        "The bus departs from the train station every ten minutes.",
    ),
    (
        "Wir müssen das Projekt bis Freitag abschließen.",
        (
            "We must finish the project by Friday.",
            "We have to complete the project by Friday.",
            "The project has to be finished by Friday.",
        ),
        "We need to wrap up the project by Friday.",
    ),
    (
        "Im Winter wird es hier schon um vier Uhr dunkel.",
        (
            "In winter it gets dark here as early as four o'clock.",
            "Here in winter it is already dark by four.",
            "During the winter it gets dark here at four o'clock already.",
        ),
        "In the winter it already gets dark here at four.",
    ),
    (
        "Mein Großvater hat früher als Lehrer gearbeitet.",
        (
            "My grandfather used to work as a teacher.",
            "My grandfather worked as a teacher in the past.",
            "My grandfather was formerly a teacher.",
        ),
        "My grandfather previously worked as a teacher.",
    ),
    (
        "Die Straße ist wegen Bauarbeiten bis Ende Mai gesperrt.",
        (
            "The road is closed until the end of May because of construction work.",
            "Due to roadworks, the street is closed until the end of May.",
            "The road will be closed for construction until late May.",
        ),
        "The street is blocked because of building work until the end of May.",
    ),
    (
        "Hast du schon die Nachrichten gehört?",
        (
            "Have you heard the news yet?",
            "Did you hear the news already?",
            "Have you already heard the news?",
        ),
        "Have you heard the news already?",
    ),
    (
        "Das Wasser in diesem See ist im Sommer angenehm warm.",
        (
            "The water in this lake is pleasantly warm in summer.",
            "In summer the water of this lake is nicely warm.",
            "This lake's water is pleasantly warm during the summer.",
        ),
        "In summertime the water in this lake is comfortably warm.",
    ),
    (
        "Er hat vergessen, die Tür abzuschließen.",
        (
            "He forgot to lock the door.",
            "He did not remember to lock the door.",
            "He forgot to lock up the door.",
        ),
        "He forgot about locking the door.",
    ),
    (
        "Unsere Mannschaft hat das Spiel mit zwei zu eins gewonnen.",
        (
            "Our team won the match two to one.",
            "Our team won the game 2-1.",
            "Our side won the match by two goals to one.",
        ),
        "Our team has won the game two to one.",
    ),
    (
        "Die Bibliothek bietet kostenlose Sprachkurse für Erwachsene an.",
        (
            "The library offers free language courses for adults.",
            "The library provides free language classes for adults.",
            "Free language courses for adults are offered by the library.",
        ),
        "The library offers language lessons for adults free of charge.",
    ),
    (
        "Ich konnte letzte Nacht wegen des Lärms nicht schlafen.",
        (
            "I could not sleep last night because of the noise.",
            "I couldn't sleep last night due to the noise.",
            "Because of the noise, I was unable to sleep last night.",
        ),
        "I could not get any sleep last night because of the noise.",
    ),
    (
        "Die Wissenschaftler haben eine neue Art von Frosch entdeckt.",
        (
            "The scientists have discovered a new species of frog.",
            "Scientists discovered a new kind of frog.",
            "Researchers have found a new species of frog.",
        ),
        "The scientists have discovered a new frog species.",
    ),
    (
        "Vergiss nicht, deiner Mutter zum Geburtstag zu gratulieren.",
        (
            "Do not forget to wish your mother a happy birthday.",
            "Don't forget to congratulate your mother on her birthday.",
            "Remember to wish your mom a happy birthday.",
        ),
        "Don't forget to wish your mother happy birthday.",
    ),
    (
        "Der Supermarkt hat sonntags von zehn bis sechs geöffnet.",
        (
            "The supermarket is open from ten to six on Sundays.",
            "On Sundays the supermarket opens from ten until six.",
            "The supermarket's Sunday hours are ten to six.",
        ),
        "The supermarket is open on Sundays from ten to six.",
    ),
    (
        "Sie reist jedes Jahr mit ihrer Familie nach Italien.",
        (
            "She travels to Italy with her family every year.",
            "Every year she goes to Italy with her family.",
            "She and her family travel to Italy each year.",
        ),
        "Each year she travels with her family to Italy.",
    ),
    (
        "Das Medikament sollte nach dem Essen eingenommen werden.",
        (
            "The medicine should be taken after meals.",
            "The medication should be taken after eating.",
            "Take the medicine after a meal.",
        ),
        "This drug should be taken after food.",
    ),
    (
        "Wir haben nicht genug Stühle für alle Gäste.",
        (
            "We do not have enough chairs for all the guests.",
            "We don't have enough chairs for every guest.",
            "There are not enough chairs for all the guests.",
        ),
        "We haven't got enough chairs for all of the guests.",
    ),
    (
        "Der Hund hat die ganze Nacht gebellt.",
        (
            "The dog barked all night long.",
            "The dog was barking the whole night.",
            "The dog kept barking all night.",
        ),
        "The dog has been barking all through the night.",
    ),
    (
        "Die Temperaturen steigen am Wochenende auf über dreißig Grad.",
        (
            "Temperatures will rise to over thirty degrees at the weekend.",
            "At the weekend temperatures are going to climb above thirty degrees.",
            "Over the weekend, temperatures will go up to more than 30 degrees.",
        ),
        "Temperatures are rising to above thirty degrees this weekend.",
    ),
    (
        "Bitte lesen Sie die Anleitung, bevor Sie das Gerät benutzen.",
        (
            "Please read the instructions before you use the device.",
            "Please read the manual before using the appliance.",
            "Read the instructions before using the device, please.",
        ),
        "Please read the instructions prior to using the device.",
    ),
    (
        "Der Autor hat sein erstes Buch mit zweiundzwanzig Jahren geschrieben.",
        (
            "The author wrote his first book at the age of twenty-two.",
            "The writer wrote his first book when he was twenty-two.",
            "The author was twenty-two when he wrote his first book.",
        ),
        "The author wrote his first book aged twenty-two.",
    ),
    (
        "In dieser Stadt gibt es mehr Fahrräder als Autos.",
        (
            "There are more bicycles than cars in this city.",
            "This city has more bikes than cars.",
            "In this town there are more bicycles than cars.",
        ),
        "In this city there are more bicycles than automobiles.",
    ),
    (
        "Ich habe den Brief gestern zur Post gebracht.",
        (
            "I took the letter to the post office yesterday.",
            "Yesterday I brought the letter to the post office.",
            "I posted the letter yesterday.",
        ),
        "I took the letter to the post yesterday.",
    ),
    (
        "Das Baby schläft endlich, also sprich bitte leise.",
        (
            "The baby is finally asleep, so please speak quietly.",
            "The baby has finally fallen asleep, so please talk softly.",
            "Please keep your voice down; the baby is finally sleeping.",
        ),
        "The baby is sleeping at last, so please speak softly.",
    ),
    (
        "Die Regierung hat die Steuern für kleine Unternehmen gesenkt.",
        (
            "The government has lowered taxes for small businesses.",
            "The government cut taxes for small companies.",
            "Taxes for small businesses have been reduced by the government.",
        ),
        "The government has reduced the taxes for small firms.",
    ),
    (
        "Man kann vom Gipfel bei klarem Wetter bis zu den Alpen sehen.",
        (
            "On a clear day you can see as far as the Alps from the summit.",
            "In clear weather you can see all the way to the Alps from the top.",
            "From the peak, the Alps are visible when the weather is clear.",
        ),
        "From the summit you can see to the Alps when the weather is clear.",
    ),
)

#: The control for the "negated" system, written by hand: reference 1 of each sentence with one
#: word edit that keeps its meaning, at the place of the negated system's edit and of its kind
#: where the language allows (a synonym where it swaps a word for its opposite, a neutral word
#: where it inserts "not", "never" or "hardly" where it removes "not"), else at a neighbouring
#: word. Every sentence differs from reference 1 by exactly one word (tests/test_text_metrics.py).
PARAPHRASED: tuple[str, ...] = (
    "The train to Berlin is already twenty minutes late today.",
    "My sister has now worked in a hospital for three years.",
    "Can you just pass me the salt, please?",
    "The museum is shut on Mondays.",
    "We saw a very nice film last night.",
    "The doctor says that I should drink extra water.",
    "Food prices have increased sharply over the last year.",
    "It will definitely rain in the north tomorrow.",
    "I have accidentally left my key at the office.",
    "The children are happily playing in the garden while it is still light.",
    "The new laptop is lighter and quicker than the old one.",
    "Please turn off your phone during the performance.",
    "We will then meet at eight o'clock in front of the cinema.",
    "The bridge was originally built in 1890.",
    "He speaks three languages fluently, but he can't cook.",
    "The restaurant on the corner has the finest pizza in town.",
    "Following the rain the air was fresh and cool.",
    "The company wants to recruit a hundred new employees next year.",
    "I enjoy reading books about history.",
    "The airport is located about thirty kilometres from the city.",
    "She aced the exam on her first attempt.",
    "Children under twelve are never allowed to swim alone.",
    "The concert was completely sold out, so we stayed at home.",
    "This plant needs a lot of sun and scant water.",
    "The bus leaves the station every 10 minutes.",
    "We must really finish the project by Friday.",
    "In wintertime it gets dark here as early as four o'clock.",
    "My grandpa used to work as a teacher.",
    "The road is shut until the end of May because of construction work.",
    "Have you perhaps heard the news yet?",
    "The water in this lake is pleasantly mild in summer.",
    "He neglected to lock the door.",
    "Our team took the match two to one.",
    "The library offers complimentary language courses for adults.",
    "I could hardly sleep last night because of the noise.",
    "The scientists have recently discovered a new species of frog.",
    "Do not forget to wish your mum a happy birthday.",
    "The supermarket is open from ten until six on Sundays.",
    "She goes to Italy with her family every year.",
    "The medicine should be taken following meals.",
    "We do not have sufficient chairs for all the guests.",
    "The hound barked all night long.",
    "Temperatures will climb to over thirty degrees at the weekend.",
    "Please read the instructions before you operate the device.",
    "The author wrote his debut book at the age of twenty-two.",
    "There are more bikes than cars in this city.",
    "I brought the letter to the post office yesterday.",
    "The baby is finally sleeping, so please speak quietly.",
    "The government has reduced taxes for small businesses.",
    "On a cloudless day you can see as far as the Alps from the summit.",
)

#: Meaning-reversing word swaps for the "negated" system (applied to the first word found).
ANTONYMS: dict[str, str] = {
    "good": "bad",
    "best": "worst",
    "closed": "open",
    "open": "closed",
    "more": "less",
    "little": "much",
    "early": "late",
    "lighter": "heavier",
    "after": "before",
    "before": "after",
    "risen": "fallen",
    "rise": "fall",
    "warm": "cold",
    "off": "on",
    "hire": "fire",
    "like": "dislike",
    "passed": "failed",
    "won": "lost",
    "free": "paid",
    "forgot": "remembered",
    "winter": "summer",
    "grandfather": "grandmother",
    "first": "last",
    "asleep": "awake",
    "lowered": "raised",
    "clear": "cloudy",
    "night": "day",
    "yesterday": "tomorrow",
    "italy": "spain",
}
#: Number words changed by the "negated" system when no other rule applies.
NUMBERS: dict[str, str] = {"ten": "thirty", "three": "five", "twenty": "fifty", "twelve": "six"}
#: Words that carry a negation; removing one reverses the meaning.
NEGATIONS = ("not", "never")
NEGATED_FORMS = {"cannot": "can", "can't": "can", "couldn't": "could", "don't": "do"}
#: Auxiliary verbs after which "not" is inserted when nothing else applies.
AUXILIARIES = ("is", "are", "was", "were", "will", "can", "could", "should", "must", "has", "have")
