# gptscope — plain Makefile. `make` builds ./gptscope; `make check` runs every test,
# optimized and under AddressSanitizer + UBSan. See README.md.
#
#   make            optimized build (-O3, -march=native when the compiler takes it)
#   make SAN=1      sanitizer build into build-san/
#   make PORTABLE=1 no -march=native (for binaries that must run on other CPUs)
#   make test       build and run the test suite once (honours SAN=1)
#   make check      make test, then make test SAN=1
#   make bench      gptscope bench on a random GPT-2-124M-shaped model

CC      ?= cc
PYTHON  ?= /usr/bin/python3
PKG     ?= pkg-config

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

# --- dependency probes: a missing library names the Debian package to install ---
NOPROBE_GOALS := clean help
ifeq ($(filter-out $(NOPROBE_GOALS),$(MAKECMDGOALS)),$(MAKECMDGOALS)$(if $(MAKECMDGOALS),,x))
probe = $(if $(shell $(PKG) --exists $(1) 2>/dev/null && echo ok),,$(error $(1) not found by $(PKG): install it with `apt-get install $(2)`))
$(call probe,openblas,libopenblas-dev)
$(call probe,libpcre2-8,libpcre2-dev)
$(call probe,libcjson,libcjson-dev)
endif

CORE_PKGS := openblas libpcre2-8 libcjson
CFLAGS_PKG := $(shell $(PKG) --cflags $(CORE_PKGS) 2>/dev/null)
LIBS_PKG   := $(shell $(PKG) --libs $(CORE_PKGS) 2>/dev/null)

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter
CFLAGS  ?=
CFLAGS  += -std=c11 -D_DEFAULT_SOURCE -g $(OPT) $(MARCH) $(WARN) -Iinclude -Isrc $(CFLAGS_PKG)
LDLIBS  := $(LIBS_PKG) -lm -lpthread

CORE_SRC := $(wildcard src/core/*.c src/train/*.c)
CLI_SRC  := $(wildcard src/cli/*.c) src/main.c
TEST_SRC := $(wildcard tests/test_*.c)

CORE_OBJ := $(CORE_SRC:%.c=$(B)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(B)/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(B)/tests/%)
LIB      := $(B)/libgpt2.a

.PHONY: all test check clean help fixtures tokenizer-data bench

all: $(APP)

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(APP): $(CLI_OBJ) $(LIB)
	$(CC) $(LDSAN) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS)

# --- tests ---------------------------------------------------------------------
CMOCKA_LIBS = $(shell $(PKG) --libs cmocka 2>/dev/null)
FIX := $(B)/fixtures
TOKDIR := .cache/gpt2-tokenizer

$(B)/tests/%: tests/%.c $(LIB)
	@$(PKG) --exists cmocka || { echo "cmocka not found: apt-get install libcmocka-dev" >&2; exit 1; }
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDSAN) -Itests -o $@ $< $(LIB) $(CMOCKA_LIBS) $(LDLIBS)

tokenizer-data: $(TOKDIR)/encoder.json
$(TOKDIR)/encoder.json: scripts/fetch-gpt2-tokenizer.sh
	sh scripts/fetch-gpt2-tokenizer.sh $(TOKDIR)

fixtures: $(FIX)/.done
$(FIX)/.done: $(wildcard tests/ref/*.py) $(TOKDIR)/encoder.json
	@$(PYTHON) -c 'import numpy, regex' 2>/dev/null || { echo "python3-numpy and python3-regex are needed: apt-get install python3-numpy python3-regex" >&2; exit 1; }
	rm -rf $(FIX) && mkdir -p $(FIX)
	$(PYTHON) tests/ref/make_model_fixtures.py --out $(FIX)
	$(PYTHON) tests/ref/make_tokenizer_fixtures.py --out $(FIX)/tokenizer \
	    --gpt2-tokenizer $(TOKDIR) --tiny-tokenizer $(FIX)/models/tiny-f32
	$(PYTHON) tests/ref/make_cli_fixtures.py --fixtures $(FIX)
	$(PYTHON) tests/ref/bpe_train_ref.py --out $(FIX)/bpe_train
	touch $@

test: $(APP) $(TEST_BIN) fixtures
	@GPTSCOPE_FIXTURES=$(FIX) GPTSCOPE_BIN=$(CURDIR)/$(APP) GPT2_TOKENIZER_DIR=$(TOKDIR) PYTHON=$(PYTHON) \
	    sh tests/run_tests.sh $(TEST_BIN)

check:
	$(MAKE) test
	$(MAKE) test SAN=1

# Speed on a random GPT-2-124M-shaped model, F32 then 16-bit weights (see README, Performance).
bench: $(APP)
	./$(APP) bench --dtype f32
	./$(APP) bench --dtype bf16

clean:
	rm -rf build build-san gptscope

help:
	@sed -n '2,10p' Makefile

-include $(CORE_OBJ:.o=.d) $(CLI_OBJ:.o=.d)
