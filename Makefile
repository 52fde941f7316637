# ssl_renegotiate/Makefile

MODULE_big = ssl_renegotiate
OBJS = \
	$(WIN32RES) \
	accounting.o \
	ending.o \
	handshake.o \
	interval.o \
	key_limits.o \
	keyupdate.o \
	policy.o \
	preauth.o \
	renegotiation.o \
	role_totals.o \
	sendpoint.o \
	setting_checks.o \
	settings.o \
	slots.o \
	sql_api.o \
	sql_totals.o \
	ssl_renegotiate.o \
	statsfile.o \
	thresholds.o \
	totals.o

EXTENSION = ssl_renegotiate
DATA = ssl_renegotiate--1.0.sql ssl_renegotiate--1.0--1.1.sql \
	ssl_renegotiate--1.1--1.2.sql ssl_renegotiate--1.0--1.2.sql
PGFILEDESC = "ssl_renegotiate - TLS traffic accounting and key rotation"

SHLIB_LINK += -lssl -lcrypto

PG_CONFIG ?= pg_config

# The server's headers are not -Wextra clean; treat them as system headers
# so that warnings speak about our code only.
PG_CPPFLAGS = -isystem $(shell $(PG_CONFIG) --includedir-server)

# Regression tests run on a temporary instance of their own (see
# regress.conf), so "make installcheck" needs no running server.
REGRESS = setup settings views functions privileges oldextversions
REGRESS_OPTS = --temp-instance=./tmp_check_regress --temp-config=$(srcdir)/regress.conf
# One more instance without shared_preload_libraries.
REGRESS_NOT_PRELOADED = not_preloaded

TAP_TESTS = 1

# Nothing here is worth JIT inlining; don't require clang for bitcode.
override with_llvm = no

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# after the include: Makefile.global resets PROVE_FLAGS
PROVE_FLAGS += -I $(srcdir)/t
# PROVE_JOBS=N runs N TAP files at once (scripts/test.sh: one per CPU); each
# file has its own clusters, and ports are locked in PG_TEST_PORT_DIR
PROVE_FLAGS += $(if $(PROVE_JOBS),-j$(PROVE_JOBS))

# What "make installcheck" runs before pg_regress and prove.  The Debian
# package's tests (debian/tests/installcheck) keep only the second: they run
# where nothing is built and no linter is installed.
INSTALLCHECK_FIRST = lint installcheck-not-preloaded
installcheck: $(INSTALLCHECK_FIRST)

installcheck-not-preloaded:
	$(pg_regress_installcheck) --temp-instance=./tmp_check_not_preloaded \
		--outputdir=./not_preloaded $(REGRESS_NOT_PRELOADED)

# Static analysis: the rooms and their includes (scripts/rooms.sh, which
# first checks itself on planted breakage), then cppcheck and clang-tidy,
# which must be silent on our C.
C_SOURCES = $(patsubst %.o,%.c,$(filter %.o,$(OBJS)))
# The include directories PostgreSQL was configured with (an OpenSSL of its
# own: scripts/pg_build.sh MAJOR SERIES), as system headers, so that
# clang-tidy reads the OpenSSL the build compiles against.
CONFIGURED_INCLUDES = $(patsubst -I%,-isystem %,$(filter -I%,$(shell $(PG_CONFIG) --cppflags)))
# LINT_JOBS=N: cppcheck and clang-tidy on N files at once (scripts/test.sh:
# one per CPU)
LINT_JOBS ?= 1
lint: $(filter %.o,$(OBJS))
	bash $(srcdir)/scripts/rooms.sh --self-test
	bash $(srcdir)/scripts/rooms.sh $(filter %.o,$(OBJS))
	cppcheck -j $(LINT_JOBS) --error-exitcode=1 --enable=warning,performance,portability \
		--std=c99 --quiet --inline-suppr --suppress=missingIncludeSystem --suppress=toomanyconfigs \
		--suppress='*:$(includedir_server)/*' \
		-I. -I$(includedir_server) $(C_SOURCES)
	printf '%s\n' $(C_SOURCES) | xargs -P $(LINT_JOBS) -n 4 sh -c 'clang-tidy --quiet "$$@" -- \
		-I. -isystem $(includedir_server) -isystem $(includedir_internal) $(CONFIGURED_INCLUDES) -D_GNU_SOURCE' clang-tidy

.PHONY: lint installcheck-not-preloaded clean-not-preloaded

clean: clean-not-preloaded
clean-not-preloaded:
	rm -rf ./tmp_check_regress ./tmp_check_not_preloaded ./not_preloaded
