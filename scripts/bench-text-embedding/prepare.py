"""Inputs of scripts/bench-text-embedding.sh.

  prepare.py texts OUT.jsonl [N]
      N (default 256) texts of 8 to 120 words drawn with a fixed seed from a
      list of common English words, some with punctuation, as request bodies
      {"text": "..."}, one a line (eas-server bench --bodies).
  prepare.py bert-base DIR BERT_TOKENIZER_DIR
      a BERT-base-shaped model (12 layers, hidden 768, 12 heads, 3072 wide,
      512 positions, bert-base-uncased's 30522-token vocabulary) with random
      weights (torch seed 37, transformers' own initialisation) saved as a
      Hugging Face checkpoint directory: config.json, model.safetensors, and
      the real bert-base-uncased tokenizer.json and vocab.txt copied beside
      them. Written once; a DIR with model.safetensors is left as it is.
"""
import json
import os
import random
import shutil
import sys

WORDS = """the of and to a in is it you that he was for on are with as his they be at one have this from or
had by hot word but what some we can out other were all there when up use your how said an each she which do
their time if will way about many then them write would like so these her long make thing see him two has look
more day could go come did number sound no most people my over know water than call first who may down side
been now find any new work part take get place made live where after back little only round man year came show
every good me give our under name very through just form sentence great think say help low line differ turn
cause much mean before move right boy old too same tell does set three want air well also play small end put
home read hand port large spell add even land here must big high such follow act why ask men change went light
kind off need house picture try us again animal point mother world near build self earth father head stand own
page should country found answer school grow study still learn plant cover food sun four between state keep eye
never last let thought city tree cross farm hard start might story saw far sea draw left late run while press
close night real life few north open seem together next white children begin got walk example ease paper group
always music those both mark often letter until mile river car feet care second book carry took science eat room
friend began idea fish mountain stop once base hear horse cut sure watch color face wood main enough plain girl
usual young ready above ever red list though feel talk bird soon body dog family direct pose leave song measure
door product black short numeral class wind question happen complete ship area half rock order fire south problem
piece told knew pass since top whole king space heard best hour better true during hundred five remember step
early hold west ground interest reach fast verb sing listen six table travel less morning ten simple several vowel
toward war lay against pattern slow center love person money serve appear road map rain rule govern pull cold
notice voice unit power town fine certain fly fall lead cry dark machine note wait plan figure star box noun field
rest correct able pound done beauty drive stood contain front teach week final gave green oh quick develop ocean
warm free minute strong special mind behind clear tail produce fact street inch multiply nothing course stay wheel
full force blue object decide surface deep moon island foot system busy test record boat common gold possible
plane stead dry wonder laugh thousand ago ran check game shape equate miss brought heat snow tire bring yes distant
fill east paint language among grand ball yet wave drop heart am present heavy dance engine position arm wide sail
material size vary settle speak weight general ice matter circle pair include divide syllable felt perhaps pick
sudden count square reason length represent art subject region energy hunt probable bed brother egg ride cell
believe fraction forest sit race window store summer train sleep prove lone leg exercise wall catch mount wish sky
board joy winter sat written wild instrument kept glass grass cow job edge sign visit past soft fun bright gas
weather month million bear finish happy hope flower clothe strange gone jump baby eight village meet root buy
raise solve metal whether push seven paragraph third shall held hair describe cook floor either result burn hill
safe cat century consider type law bit coast copy phrase silent tall sand soil roll temperature finger industry
value fight lie beat excite natural view sense ear else quite broke case middle kill son lake moment scale loud
spring observe child straight consonant nation dictionary milk speed method organ pay age section dress cloud
surprise quiet stone tiny climb cool design poor lot experiment bottom key iron single stick flat twenty skin smile
crease hole trade melody trip office receive row mouth exact symbol die least trouble shout except wrote seed tone
join suggest clean break lady yard rise bad blow oil blood touch grew cent mix team wire cost lost brown wear
garden equal sent choose fell fit flow fair bank collect save control decimal gentle woman captain practice
separate difficult doctor please protect noon whose locate ring character insect caught period indicate radio
spoke atom human history effect electric expect crop modern element hit student corner party supply bone rail
imagine provide agree thus capital chair danger fruit rich thick soldier process operate guess necessary sharp
wing create neighbor wash bat rather crowd corn compare poem string bell depend meat rub tube famous dollar stream
fear sight thin triangle planet hurry chief colony clock mine tie enter major fresh search send yellow gun allow
print dead spot desert suit current lift rose continue block chart hat sell success company subtract event
particular deal swim term opposite wife shoe shoulder spread arrange camp invent cotton born determine quart nine
truck noise level chance gather shop stretch throw shine property column molecule select wrong gray repeat require
broad prepare salt nose plural anger claim continent oxygen sugar death pretty skill women season solution magnet
silver thank branch match suffix especially fig afraid huge sister steel discuss forward similar guide experience
score apple bought led pitch coat mass card band rope slip win dream evening condition feed tool total basic smell
valley nor double seat arrive master track parent shore division sheet substance favor connect post spend chord
fat glad original share station dad bread charge proper bar offer segment slave duck instant market degree
populate chick dear enemy reply drink occur support speech nature range steam motion path liquid log meant
quotient teeth shell neck""".split()


def texts(out, n=256):
    rng = random.Random(37)
    with open(out, "w") as f:
        for _ in range(n):
            k = rng.randint(8, 120)
            words = [rng.choice(WORDS) for _ in range(k)]
            for i in range(len(words)):
                r = rng.random()
                if r < 0.06:
                    words[i] += ","
                elif r < 0.10:
                    words[i] += "."
            words[0] = words[0].capitalize()
            f.write(json.dumps({"text": " ".join(words).rstrip(",.") + "."}) + "\n")


def bert_base(out, tok):
    if os.path.exists(os.path.join(out, "model.safetensors")):
        return
    import torch
    from transformers import BertConfig, BertModel
    torch.manual_seed(37)
    cfg = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                     intermediate_size=3072, max_position_embeddings=512)
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    BertModel(cfg).eval().save_pretrained(tmp, safe_serialization=True)
    for f in ("tokenizer.json", "vocab.txt"):
        shutil.copy(os.path.join(tok, f), os.path.join(tmp, f))
    json.dump({"do_lower_case": True, "model_max_length": 512}, open(os.path.join(tmp, "tokenizer_config.json"), "w"))
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)


if __name__ == "__main__":
    if sys.argv[1] == "texts":
        texts(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 256)
    elif sys.argv[1] == "bert-base":
        bert_base(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
