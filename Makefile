# ssl_renegotiate/Makefile

MODULE_big = ssl_renegotiate
# The C under src/: the hooks, the hot paths and the SQL functions at the
# top, the machinery in a folder per subsystem (docs/internals.md).
OBJS = \
	$(WIN32RES) \
	src/accounting.o \
	src/rotation/ending.o \
	src/rotation/interval.o \
	src/rotation/key_limits.o \
	src/rotation/keyupdate.o \
	src/rotation/policy.o \
	src/rotation/rekey_log.o \
	src/rotation/renegotiation.o \
	src/sendpoint.o \
	src/settings/setting_checks.o \
	src/settings/setting_files.o \
	src/settings/settings.o \
	src/sql_api.o \
	src/ssl_renegotiate.o \
	src/stats/preauth.o \
	src/stats/role_drops.o \
	src/stats/role_totals.o \
	src/stats/slots.o \
	src/stats/statsfile.o \
	src/stats/totals.o \
	src/thresholds.o

EXTENSION = ssl_renegotiate
# The install and upgrade scripts (sql/).  Each SQL object is defined once,
# for each version that changes it, in sql/objects/VERSION/; an upgrade
# script that needs it is assembled at build time from its template
# (sql/*.sql.in: "-- @include objects/VERSION/NAME.sql" lines), so that two
# paths to one version share one definition.  Those of released versions
# are frozen: servers in the field installed them, and they must install
# the same objects forever; make check-sql-frozen (run by make lint)
# compares the scripts as built with the sums in sql/SHA256SUMS.
DATA = sql/ssl_renegotiate--1.0.sql sql/ssl_renegotiate--1.0--1.1.sql \
	sql/ssl_renegotiate--1.2--1.3.sql
DATA_built = sql/ssl_renegotiate--1.1--1.2.sql sql/ssl_renegotiate--1.0--1.2.sql
PGFILEDESC = "ssl_renegotiate - TLS traffic accounting and key rotation"

SHLIB_LINK += -lssl -lcrypto

PG_CONFIG ?= pg_config

# The server's headers are not -Wextra clean; treat them as system headers
# so that warnings speak about our code only.
PG_CPPFLAGS = -isystem $(shell $(PG_CONFIG) --includedir-server)
# Our own headers are named from src/: #include "stats/slots.h".
PG_CPPFLAGS += -I$(srcdir)/src

# "make installcheck" is PGXS's: pg_regress on the running server that
# PGHOST, PGPORT and PGUSER (a superuser) point to, with ssl_renegotiate
# preloaded and its settings at their defaults (checked first: see
# installcheck-server).  REGRESS=not_preloaded runs the one file meant for a
# server without the library.
REGRESS = setup settings views functions privileges oldextversions
REGRESS_NOT_PRELOADED = not_preloaded
# The pg_regress inputs (sql/, expected/) and the TAP files (t/) are under
# test/; so is the configuration of the preloading instance, regress.conf.
REGRESS_OPTS = --inputdir=$(srcdir)/test

# Nothing here is worth JIT inlining; don't require clang for bitcode.
override with_llvm = no

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# An upgrade script from its template: each "-- @include FILE" line is
# replaced by FILE (under sql/), which must exist and not be empty.
sql/%.sql: sql/%.sql.in $(wildcard $(srcdir)/sql/objects/*/*.sql)
	@$(MKDIR_P) $(dir $@)
	awk -v dir='$(srcdir)/sql/' ' \
		/^-- @include / { \
			f = dir $$3; n = 0; \
			while ((r = (getline line < f)) > 0) { print line; n++ } \
			if (r < 0 || n == 0) { print FILENAME ": cannot include " f > "/dev/stderr"; exit 1 } \
			close(f); next \
		} \
		{ print }' $< >$@.tmp
	mv $@.tmp $@

# PGXS tracks header dependencies only in a server built with
# --enable-depend (Debian's is not): rebuild every object when a header
# changes, so that no object keeps an old struct layout.
$(OBJS): $(wildcard $(srcdir)/src/*.h $(srcdir)/src/*/*.h)
# A VPATH build (pg_buildext builds in build-NN/) writes each object into
# a folder of the build directory, made first.  The folders are named by
# their absolute path, which VPATH does not search: it would find the
# source tree's.
OBJ_DIRS = $(addprefix $(CURDIR)/,$(sort $(dir $(filter %.o,$(OBJS)))))
$(filter %.o,$(OBJS)): | $(OBJ_DIRS)
$(OBJ_DIRS):
	$(MKDIR_P) $@

# after the include: Makefile.global resets PROVE_FLAGS.  prove runs in
# $(srcdir); without PROVE_TESTS, PGXS's prove_installcheck would run t/*.pl:
# every TAP file is under test/t.
PROVE_FLAGS += -I test/t
PROVE_TESTS ?= test/t/*.pl
# PROVE_JOBS=N runs N TAP files at once (scripts/test.sh: one per CPU); each
# file has its own clusters, and ports are locked in PG_TEST_PORT_DIR
PROVE_FLAGS += $(if $(PROVE_JOBS),-j$(PROVE_JOBS))

# Before pg_regress, a look at the server it is about to use: the expected
# output is that of a server which preloads the library (or, for
# REGRESS=not_preloaded, does not) and leaves every ssl_renegotiate setting
# at its default, also in the ALTER ROLE / ALTER DATABASE settings its
# sessions get; settings.sql also ALTER SYSTEM RESETs what it set, which
# would drop the server's own value.  Any mismatch stops here, saying what.
SERVER_MUST_PRELOAD = $(if $(filter-out $(REGRESS_NOT_PRELOADED),$(REGRESS)),true,false)
SERVER_CHECK_SQL = \
	SELECT CASE WHEN $(SERVER_MUST_PRELOAD) \
	  THEN 'the server does not preload ssl_renegotiate: add it to shared_preload_libraries and restart it (REGRESS=not_preloaded is the test for a server without it)' \
	  ELSE 'the server preloads ssl_renegotiate: REGRESS=not_preloaded needs one that does not' END \
	FROM (SELECT EXISTS (SELECT FROM pg_settings WHERE name = 'ssl_renegotiate.tls12' AND vartype = 'enum') AS preloaded) AS s \
	WHERE preloaded <> $(SERVER_MUST_PRELOAD) \
	UNION ALL \
	SELECT format('%s is set to %s (%s%s): the expected output is that of the defaults; run the tests on a server where no ssl_renegotiate setting is set', \
	  name, setting, source, coalesce(' in ' || sourcefile || ':' || sourceline, '')) \
	FROM pg_settings WHERE starts_with(name, 'ssl_renegotiate.') AND source <> 'default' \
	UNION ALL \
	SELECT format('%s SET %s applies to the tests'' sessions: the expected output is that of the defaults; RESET it, or run the tests on another server', \
	  CASE WHEN s.setrole <> 0 AND s.setdatabase <> 0 THEN format('ALTER ROLE %I IN DATABASE %I', r.rolname, d.datname) \
	       WHEN s.setrole <> 0 THEN format('ALTER ROLE %I', r.rolname) \
	       WHEN s.setdatabase <> 0 THEN format('ALTER DATABASE %I', d.datname) \
	       ELSE 'ALTER ROLE ALL' END, c.cfg) \
	FROM pg_db_role_setting s CROSS JOIN LATERAL unnest(s.setconfig) AS c(cfg) \
	  LEFT JOIN pg_roles r ON r.oid = s.setrole LEFT JOIN pg_database d ON d.oid = s.setdatabase \
	WHERE starts_with(c.cfg, 'ssl_renegotiate.') \
	  AND (s.setrole = 0 OR r.rolname = current_user OR r.rolname LIKE 'regress\_sslr%') \
	  AND (s.setdatabase = 0 OR d.datname = 'contrib_regression')
# The expected output is also that of a session without TLS (the session
# accessors return NULL, the views list no row of its own): the tests' own
# connections never use it, whatever PGSSLMODE or the server's ssl say.
installcheck installcheck-server: export PGSSLMODE = disable
installcheck: $(if $(strip $(REGRESS)),installcheck-server)
installcheck-server:
	@problems=$$('$(bindir)/psql' -X -At -v ON_ERROR_STOP=1 -d postgres -c "$(SERVER_CHECK_SQL)") || { \
		echo 'make installcheck: no server to test (it runs on the running server that PGHOST, PGPORT and PGUSER point to)' >&2; exit 1; }; \
	if [ -n "$$problems" ]; then printf '%s\n' "$$problems" | sed 's/^/make installcheck: /' >&2; exit 1; fi

# The whole suite, which needs no running server (scripts/test.sh runs it on
# every cell): make lint and pg_regress on a temporary instance without
# shared_preload_libraries, then pg_regress on one with it (test/regress.conf),
# then every TAP file (test/t/*.pl, or PROVE_TESTS=...); the two pg_regress
# instances never run at once, even under make -j.  Each part is a target
# of its own.  The Debian package's tests (debian/tests/installcheck) run
# PGXS's installcheck instead, on pg_virtualenv's servers.
define regress_preloaded
$(pg_regress_installcheck) $(REGRESS_OPTS) --temp-instance=./tmp_check_regress \
	--temp-config=$(srcdir)/test/regress.conf $(REGRESS)
endef

check-all: lint check-not-preloaded peer
	$(regress_preloaded)
	$(prove_installcheck)

check-not-preloaded:
	$(pg_regress_installcheck) $(REGRESS_OPTS) --temp-instance=./tmp_check_not_preloaded \
		--outputdir=./not_preloaded $(REGRESS_NOT_PRELOADED)

check-preloaded:
	$(regress_preloaded)

check-tap: peer
	$(prove_installcheck)

# The hostile TLS client of test/t/030 (test/t/peer/Makefile), built in
# the tree the TAP tests run from
peer:
	$(MAKE) -C $(srcdir)/test/t/peer PG_CONFIG='$(PG_CONFIG)'

# Static analysis: the modules and their includes (scripts/modules.sh, which
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
lint: check-sql-frozen shellcheck indent-check tidy-perl-check peer $(filter %.o,$(OBJS))
	bash $(srcdir)/scripts/modules.sh --self-test
	bash $(srcdir)/scripts/modules.sh $(filter %.o,$(OBJS))
	cppcheck -j $(LINT_JOBS) --error-exitcode=1 --enable=warning,performance,portability \
		--std=c99 --quiet --inline-suppr --suppress=missingIncludeSystem --suppress=toomanyconfigs \
		--suppress='*:$(includedir_server)/*' \
		-I$(srcdir)/src -I$(includedir_server) $(C_SOURCES)
	printf '%s\n' $(C_SOURCES) | xargs -P $(LINT_JOBS) -n 4 sh -c 'clang-tidy --quiet "$$@" -- \
		-I$(srcdir)/src -isystem $(includedir_server) -isystem $(includedir_internal) $(CONFIGURED_INCLUDES) -D_GNU_SOURCE' clang-tidy

# The released install and upgrade scripts, byte for byte as released: a
# released script is never edited (a change goes into the upgrade script
# of the version being built); a new release adds its sums.
check-sql-frozen: $(DATA_built)
	@for f in $$(awk '{ print $$2 }' $(srcdir)/sql/SHA256SUMS); do \
		if [ -f "sql/$$f" ]; then p="sql/$$f"; else p="$(srcdir)/sql/$$f"; fi; \
		echo "$$(awk -v f="$$f" '$$2 == f { print $$1 }' $(srcdir)/sql/SHA256SUMS)  $$p"; \
	done | sha256sum --check --strict --quiet || { \
		echo 'make check-sql-frozen: a released script changed (sql/SHA256SUMS): put the change in the upgrade script of the version being built' >&2; exit 1; }
	@echo "check-sql-frozen: the $$(wc -l <$(srcdir)/sql/SHA256SUMS) released scripts are as released"

# Formatting by machine (CONTRIBUTING.md).
#
# C: PostgreSQL's pgindent, with PostgreSQL's typedefs.list and ours,
# typedefs.list.  scripts/pgindent_build.sh (as root; scripts/test.sh runs
# it) puts pgindent of the pinned PostgreSQL 18 tarball, its typedefs.list
# and its pg_bsd_indent in PGINDENT_DIR; PGINDENT_SCRIPT=/path/to/pgindent
# takes another (with PG_TYPEDEFS=, and pg_bsd_indent in PATH).  make
# indent rewrites the files; make indent-check (run by make lint) fails if
# one needs it, and fails without pgindent unless NO_PGINDENT=1 says to
# skip it.  (Not PGINDENT: pgindent reads that from the environment as the
# path of pg_bsd_indent.)
PGINDENT_DIR ?= /var/cache/ssl_renegotiate/pgindent
PGINDENT_SCRIPT ?= $(firstword $(wildcard $(PGINDENT_DIR)/pgindent) $(shell command -v pgindent 2>/dev/null))
PG_TYPEDEFS ?= $(if $(PGINDENT_SCRIPT),$(dir $(PGINDENT_SCRIPT))typedefs.list)
PG_BSD_INDENT = $(firstword $(wildcard $(dir $(PGINDENT_SCRIPT))pg_bsd_indent) pg_bsd_indent)
INDENT_FILES = $(srcdir)/src $(srcdir)/test/t/peer $(srcdir)/test/t/clients/gnutls_copy.c \
	$(srcdir)/bench/floor.c
define run_pgindent
	@if [ -z "$(PGINDENT_SCRIPT)" ]; then \
		echo "make $@: no pgindent: run scripts/pgindent_build.sh as root (or PGINDENT_SCRIPT=/path/to/pgindent; NO_PGINDENT=1 skips)" >&2; \
		[ -n "$(NO_PGINDENT)" ]; \
	elif [ ! -f "$(PG_TYPEDEFS)" ]; then \
		echo "make $@: no PostgreSQL typedefs.list beside $(PGINDENT_SCRIPT) (PG_TYPEDEFS=/path/to/typedefs.list)" >&2; exit 1; \
	else \
		typedefs=$$(mktemp) && cat '$(PG_TYPEDEFS)' '$(srcdir)/typedefs.list' >"$$typedefs" && \
		rc=0 && PGINDENT='$(PG_BSD_INDENT)' '$(PGINDENT_SCRIPT)' --typedefs="$$typedefs" $(1) $(INDENT_FILES) || rc=$$?; \
		rm -f "$$typedefs"; \
		case $$rc in \
			0) ;; \
			2) echo "make $@: the C above is not as pgindent formats it: run make indent" >&2; exit 1 ;; \
			*) echo "make $@: pgindent failed (exit status $$rc)" >&2; exit 1 ;; \
		esac; \
	fi
endef
indent:
	$(call run_pgindent,)
indent-check:
	$(call run_pgindent,--check --diff)

# Perl: perltidy with PostgreSQL's settings (.perltidyrc), Debian 12's
# perltidy (20220613); FILES= for some files only (default: every Perl file
# of the tree).  make tidy-perl rewrites them; make tidy-perl-check (run by
# make lint) fails if one needs it.
PERLTIDY ?= perltidy
PERL_FILES = $(wildcard $(srcdir)/test/t/*.pl $(srcdir)/test/t/*.pm $(srcdir)/scripts/*.pl)
tidy-perl:
	$(PERLTIDY) --profile=$(srcdir)/.perltidyrc $(or $(FILES),$(PERL_FILES))
tidy-perl-check:
	@bad=; for f in $(or $(FILES),$(PERL_FILES)); do \
		$(PERLTIDY) --profile=$(srcdir)/.perltidyrc -st -se "$$f" | diff -u "$$f" - || bad="$$bad $$f"; \
	done; \
	if [ -n "$$bad" ]; then echo "make $@: not as perltidy formats them:$$bad (make tidy-perl FILES=...)" >&2; exit 1; fi
	@echo "tidy-perl-check: $(words $(or $(FILES),$(PERL_FILES))) Perl files as perltidy formats them"

# Shell: every script, shellcheck clean (.shellcheckrc), run by make lint.
SHELL_SCRIPTS = $(wildcard $(srcdir)/scripts/*.sh $(srcdir)/bench/*.sh $(srcdir)/bench/run/*.sh \
	$(srcdir)/test/t/clients/*.sh) $(srcdir)/.ci/run $(srcdir)/debian/tests/installcheck
shellcheck:
	shellcheck $(SHELL_SCRIPTS)

.PHONY: peer lint check-sql-frozen indent indent-check tidy-perl tidy-perl-check shellcheck installcheck-server check-all check-not-preloaded check-preloaded check-tap clean-checks

clean: clean-checks
clean-checks:
	$(MAKE) -C $(srcdir)/test/t/peer PG_CONFIG='$(PG_CONFIG)' clean
	rm -rf ./tmp_check ./tmp_check_regress ./tmp_check_not_preloaded ./not_preloaded
