"""Small files in GLUE's own TSV layout, for every task (test helper)."""

import os

# Per task: (folder, {file: content}). The contents reproduce GLUE's quirks:
# unquoted quotes, CoLA's headerless train/dev, MRPC's byte-order mark,
# MNLI's 16-column dev files, QQP's `id` column, float STS-B scores.
GLUE_FILES = {
    "cola": ("CoLA", {
        "train.tsv": "gj04\t1\t\tOur friends won't buy this analysis, let "
                     "alone the next one we propose.\n"
                     "gj04\t0\t*\tThe more we study verbs, the crazier they "
                     "get \"quoted.\n"
                     "gj04\t1\t\tDay by day the facts are getting murkier.\n",
        "dev.tsv": "gj04\t1\t\tThe sailors rode the breeze clear of the "
                   "rocks.\ngj04\t0\t*\tThe weights made the rope stretch "
                   "over the pulley.\n",
        "test.tsv": "index\tsentence\n0\tBill whistled past the house.\n"
                    "1\tThe car honked its way down the road.\n",
    }),
    "sst2": ("SST-2", {
        "train.tsv": "sentence\tlabel\nhide new secretions from the parental "
                     "units \t0\nthe \" greatest \" movie of the year \t1\n"
                     "contains no wit , only labored gags \t0\n",
        "dev.tsv": "sentence\tlabel\nit 's a charming and often affecting "
                   "journey . \t1\nunflinchingly bleak and desperate \t0\n",
        "test.tsv": "index\tsentence\n0\tuneasy mishmash of styles and "
                    "genres .\n1\tthis film 's relationship to actual tension"
                    " is the same as what christmas-tree flocking in a spray "
                    "can is to actual snow .\n",
    }),
    "mrpc": ("MRPC", {
        "train.tsv": "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                     "1\t702876\t702977\tAmrozi accused his brother , whom "
                     "he called \" the witness \" .\tReferring to him as only"
                     " \" the witness \" , Amrozi accused his brother .\n"
                     "0\t2108705\t2108831\tYucaipa owned Dominick 's .\t"
                     "Yucaipa bought Dominick 's in 1995 .\n",
        "dev.tsv": "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1355540\t"
                   "1355592\tHe said the foodservice pie business doesn 't "
                   "fit .\tThe foodservice pie business does not fit .\n"
                   "0\t2029631\t2029565\tMagnarelli said Racicot hated the "
                   "Iraqi regime .\tHis wife said he was \" 100 percent "
                   "behind George Bush \" .\n",
        "test.tsv": "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n0\t1089874\t"
                    "1089925\tPCCW 's chief will leave .\tWong will leave "
                    "PCCW .\n",
    }),
    "qqp": ("QQP", {
        "train.tsv": "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                     "133273\t213221\t213222\tHow is the life of a math "
                     "student?\tWhich level of prepration is enough?\t0\n"
                     "402555\t536040\t536041\tHow do I control my horny "
                     "emotions?\tHow do you control your horniness?\t1\n",
        "dev.tsv": "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                   "201359\t303345\t303346\tWhy are African-Americans so "
                   "beautiful?\tWhy are hispanics so beautiful?\t0\n"
                   "263843\t69383\t380476\tI want to pursue PhD in "
                   "Computer Science\tHow can I get a PhD\t1\n",
        "test.tsv": "id\tquestion1\tquestion2\n0\tWould the idea of Trump "
                    "win?\tWhat are the odds of Trump winning?\n",
    }),
    "stsb": ("STS-B", {
        "train.tsv": "index\tgenre\tfilename\tyear\told_index\tsource1\t"
                     "source2\tsentence1\tsentence2\tscore\n0\tmain-captions\t"
                     "MSRvid\t2012test\t0001\tnone\tnone\tA plane is taking "
                     "off.\tAn air plane is taking off.\t5.000\n1\tmain-"
                     "captions\tMSRvid\t2012test\t0004\tnone\tnone\tA man is "
                     "playing a large flute.\tA man is playing a flute.\t"
                     "3.800\n",
        "dev.tsv": "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2"
                   "\tsentence1\tsentence2\tscore\n0\tmain-captions\tMSRvid\t"
                   "2012test\t0000\tnone\tnone\tA man with a hard hat is "
                   "dancing.\tA man wearing a hard hat is dancing.\t5.000\n"
                   "1\tmain-captions\tMSRvid\t2012test\t0002\tnone\tnone\tA "
                   "young child is riding a horse.\tA child is riding a "
                   "horse.\t4.750\n",
        "test.tsv": "index\tgenre\tfilename\tyear\told_index\tsource1\t"
                    "source2\tsentence1\tsentence2\n0\tmain-captions\tMSRvid"
                    "\t2012test\t0024\tnone\tnone\tA girl is styling her "
                    "hair.\tA girl is brushing her hair.\n",
    }),
    "mnli": ("MNLI", {
        "train.tsv": "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse"
                     "\tsentence2_binary_parse\tsentence1_parse\t"
                     "sentence2_parse\tsentence1\tsentence2\tlabel1\t"
                     "gold_label\n0\t31193\t31193n\tgovernment\t( a )\t( b )"
                     "\t(ROOT a)\t(ROOT b)\tConceptually cream skimming has "
                     "two basic dimensions.\tProduct and geography are what "
                     "make cream skimming work. \tneutral\tneutral\n1\t101457"
                     "\t101457e\ttelephone\t( a )\t( b )\t(ROOT a)\t(ROOT b)\t"
                     "you know during the season\tYou lose the things.\t"
                     "entailment\tentailment\n2\t134793\t134793e\tfiction\t"
                     "( a )\t( b )\t(ROOT a)\t(ROOT b)\tOne of our number "
                     "will carry out your instructions.\tA member of my team "
                     "will execute your orders.\tcontradiction\t"
                     "contradiction\n",
        "dev_matched.tsv": "index\tpromptID\tpairID\tgenre\t"
                           "sentence1_binary_parse\tsentence2_binary_parse\t"
                           "sentence1_parse\tsentence2_parse\tsentence1\t"
                           "sentence2\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5"
                           "\tgold_label\n0\t63735\t63735n\tslate\t( a )\t"
                           "( b )\t(ROOT a)\t(ROOT b)\tThe new rights are "
                           "nice enough\tEveryone really likes the newest "
                           "benefits \tneutral\tentailment\tneutral\tneutral"
                           "\tneutral\tneutral\n",
        "dev_mismatched.tsv": "index\tpromptID\tpairID\tgenre\t"
                              "sentence1_binary_parse\tsentence2_binary_parse"
                              "\tsentence1_parse\tsentence2_parse\tsentence1"
                              "\tsentence2\tlabel1\tlabel2\tlabel3\tlabel4\t"
                              "label5\tgold_label\n0\t75290\t75290c\tletters"
                              "\t( a )\t( b )\t(ROOT a)\t(ROOT b)\tYour "
                              "contribution helped make it possible.\tYour "
                              "contributions were of no help.\tcontradiction"
                              "\tcontradiction\tcontradiction\tcontradiction"
                              "\tcontradiction\tcontradiction\n",
        "test_matched.tsv": "index\tpromptID\tpairID\tgenre\t"
                            "sentence1_binary_parse\tsentence2_binary_parse\t"
                            "sentence1_parse\tsentence2_parse\tsentence1\t"
                            "sentence2\n0\t31493\t31493\ttravel\t( a )\t"
                            "( b )\t(ROOT a)\t(ROOT b)\tHierbas is a liqueur."
                            "\tThe liqueur is sweet.\n",
    }),
    "qnli": ("QNLI", {
        "train.tsv": "index\tquestion\tsentence\tlabel\n0\tWhen did the "
                     "third Digimon series begin?\tUnlike the two seasons "
                     "before it, it was darker.\tnot_entailment\n1\tWhich "
                     "missile batteries often have individual launchers?\t"
                     "When MANPADS is operated by specialists, batteries may"
                     " have several dozen teams.\tentailment\n",
        "dev.tsv": "index\tquestion\tsentence\tlabel\n0\tWhat came into force"
                   " after the new constitution?\tThe law came into force."
                   "\tentailment\n",
        "test.tsv": "index\tquestion\tsentence\n0\tWhat organization is "
                    "devoted to Jihad?\tThe organization is Al-Qaeda.\n",
    }),
    "rte": ("RTE", {
        "train.tsv": "index\tsentence1\tsentence2\tlabel\n0\tNo Weapons of "
                     "Mass Destruction Found in Iraq Yet.\tWeapons of Mass "
                     "Destruction Found in Iraq.\tnot_entailment\n1\tA place "
                     "of sorrow, after Pope John Paul II died.\tPope "
                     "Benedict XVI is the new leader.\tentailment\n",
        "dev.tsv": "index\tsentence1\tsentence2\tlabel\n0\tDana Reeve died "
                   "at 44.\tChristopher Reeve had an accident.\t"
                   "not_entailment\n",
        "test.tsv": "index\tsentence1\tsentence2\n0\tMexico has a city.\t"
                    "Mexico is a city.\n",
    }),
    "wnli": ("WNLI", {
        "train.tsv": "index\tsentence1\tsentence2\tlabel\n0\tI stuck a pin "
                     "through a carrot.\tThe carrot had a hole.\t1\n1\tJohn "
                     "couldn't see the stage.\tJohn is so tall.\t0\n",
        "dev.tsv": "index\tsentence1\tsentence2\tlabel\n0\tThe drain is "
                   "clogged with hair.\tThe hair has to be removed.\t1\n",
        "test.tsv": "index\tsentence1\tsentence2\n0\tMaude and Dora had "
                    "seen the trains.\tHorns were heard.\n",
    }),
}


def write_glue_task(root, task_name, files=None):
    """Writes `task_name`'s files under `root/<GLUE folder>/`; returns it."""
    folder, contents = GLUE_FILES[task_name]
    path = os.path.join(str(root), folder)
    os.makedirs(path, exist_ok=True)
    for name, text in (files or contents).items():
        with open(os.path.join(path, name), "w", encoding="utf-8",
                  newline="") as f:
            f.write(text)
    return path
