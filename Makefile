# chatgpt-credential — build, test, install. `make help` lists the targets.
SWIFT       ?= $(shell command -v swift 2>/dev/null || echo /opt/swift/usr/bin/swift)
PREFIX      ?= /usr/local
DESTDIR     ?=
BINDIR      := $(DESTDIR)$(PREFIX)/bin
MANDIR      := $(DESTDIR)$(PREFIX)/share/man/man1
MAN7DIR     := $(DESTDIR)$(PREFIX)/share/man/man7
BASHCOMPDIR := $(DESTDIR)$(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  := $(DESTDIR)$(PREFIX)/share/zsh/site-functions
FISHCOMPDIR := $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
# systemd user units (systemd/): where the user manager looks for PREFIX=/usr and /usr/local;
# for PREFIX=~/.local give USERUNITDIR=~/.local/share/systemd/user (~/.local/lib is not searched).
# Their ExecStart names UNIT_BINDIR/chatgpt-credential, substituted at install time (*.in).
USERUNITDIR ?= $(PREFIX)/lib/systemd/user
UNIT_BINDIR ?= $(PREFIX)/bin
UNITDIR     := $(DESTDIR)$(USERUNITDIR)
UNITS       := chatgpt-credential.socket chatgpt-credential.service \
               chatgpt-credential-refresh.timer chatgpt-credential-refresh.service \
               chatgpt-credential-sinks.service
# Release builds link the Swift runtime statically: ~2 ms of process start instead of ~6+.
# libstdc++ (which the Swift runtime needs) is linked statically too: the swift driver's own
# `-lstdc++` finds $(STATIC_LIB_DIR)/libstdc++.a first, a -L directory that holds only GCC's
# archive, so no libstdc++.so is loaded and relocated at every start (~0.4 ms, ~1 MB RSS; when
# the archive is missing the link simply falls back to the shared library).
# libsodium the same way: SwiftPM turns CSodium's `pkgConfig: "libsodium"` into
# `-L/usr/lib/<triplet> -lsodium` (it does not drop system directories as pkg-config does), and that
# -L comes first, so `make release` writes a libsodium.pc into $(STATIC_LIB_DIR)/pkgconfig whose
# libdir is $(STATIC_LIB_DIR), which holds libsodium.a and no libsodium.so (without the archive no
# .pc is written and the shared library is linked, as before).
# libgcc's unwinder (which libstdc++'s exceptions use) is linked statically with -static-libgcc
# when GCC's libgcc_eh.a exists, so libgcc_s.so.1 is not NEEDED either. What is left is libc6's
# (libc, libm, ld.so): the Debian package depends on libc6 only (scripts/package and
# scripts/test-package check).
# -D_FORTIFY_SOURCE=2 (Debian's default CPPFLAGS): the C shims' libc calls are checked (__*_chk).
# --disable-local-rpath: no RUNPATH $ORIGIN, so the loader does not probe ~50 absent paths
# beside the binary for each library before looking in the system directories.
# Start-up (issue 31; bench/results.md, "Start-up changes, before and after"): linked by lld, the
# Swift toolchain's own linker, instead of gold, because gold cannot pack relocations:
# -z pack-relative-relocs stores the ~21,700 relative relocations of this PIE as ~500 DT_RELR
# words instead of 520 KB of RELA entries the loader reads at every start (glibc >= 2.36 reads
# them, and the binary then needs GLIBC_ABI_DT_RELR: still libc6 only); --no-export-dynamic
# undoes the -export-dynamic of the Swift driver's static-stdlib link, which put ~3,200 of our
# own symbols in the dynamic symbol table (that no library looks up) for ld.so and the runtime's
# dladdr() to walk. --gc-sections is SwiftPM's own for release builds. The binary stays PIE: a
# non-PIE link measured ~0.1 ms faster but puts the whole image at a fixed address (SECURITY.md).
# `--version` and a warm `get` do not wait for any of the Swift runtime's start: CWarmPath answers
# them from .preinit_array (ARCHITECTURE.md, "The warm path"), so what they pay is the loader's.
START_UP_LINK  := -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs -Xlinker --no-export-dynamic
STATIC_LIB_DIR := $(CURDIR)/.build/static-libs
STATIC_LIBGCC  := $(if $(wildcard $(shell $(CC) -print-file-name=libgcc_eh.a 2>/dev/null)),-Xswiftc -Xclang-linker -Xswiftc -static-libgcc)
RELEASE_FLAGS := -c release --static-swift-stdlib --disable-local-rpath -Xlinker -L$(STATIC_LIB_DIR) \
                 --pkg-config-path $(STATIC_LIB_DIR)/pkgconfig $(STATIC_LIBGCC) -Xcc -D_FORTIFY_SOURCE=2 $(START_UP_LINK)
RELEASE_BIN  = $(shell $(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/chatgpt-credential

# Everything the build, the tests, the benchmarks and the packages need from Debian (the last line:
# dpkg-shlibdeps/dpkg-gencontrol, strip/readelf, lintian, and mmdebstrap for make test-package).
APT_PACKAGES := libsecret-1-dev libsodium-dev libcurl4-openssl-dev pkg-config \
                dbus dbus-x11 gnome-keyring libsecret-tools age git python3 python3-dbus \
                python3-dockerpycreds golang-docker-credential-helpers \
                mandoc man-db zsh fish hyperfine procps util-linux time openssl bash-completion strace systemd \
                dpkg-dev binutils lintian mmdebstrap debian-archive-keyring mount keyutils \
                bubblewrap openssh-server openssh-client jq acl linux-perf python3-venv

# Programs from PyPI the tests run for real (the sinks' ChatMock test), in a venv of the repository's
# own (.venv-tools, not committed); never installed by a test.
TOOLS_VENV   := .venv-tools
CHATMOCK_VERSION := 1.40

.PHONY: help setup deps tools apt-packages build release run test test-load test-unit bench bench-smoke demo install install-units uninstall lint-man docs fuzz fuzz-smoke clean \
        version deb dist lint-deb test-package

help:
	@echo "make setup      install the system packages (sudo apt-get), build, run the demo"
	@echo "make deps       install the system packages only (sudo apt-get unless root)"
	@echo "make tools      ChatMock from PyPI into .venv-tools (for the sinks' ChatMock test; part of make setup)"
	@echo "make run ARGS=… build and run the tool, e.g. make run ARGS=--help"
	@echo "make test       the whole test suite in a throwaway D-Bus session with gnome-keyring"
	@echo "make test-load  the long loads (LongLoad… suites: many-round races, broker load, make install's release build), also in CI"
	@echo "make demo       an offline walk-through against the local test issuer"
	@echo "make docs       write the completions and the man page's synopsis and option lists from the verbs' specs"
	@echo "make bench      benchmarks against the C reference helpers -> bench/results.md"
	@echo "make fuzz       every libFuzzer target for FUZZ_SECONDS (60) each; fuzz-smoke: 10 s each"
	@echo "make install    PREFIX=/usr/local DESTDIR= ; make uninstall reverses it (install-units: the systemd user units alone)"
	@echo "make deb        dist/chatgpt-credential_VERSION_ARCH.deb (dpkg-deb; no Swift needed to install it)"
	@echo "make dist       the .deb, dist/chatgpt-credential-VERSION-linux-ARCH.tar.gz and dist/SHA256SUMS"
	@echo "make lint-deb   lintian on the .deb (fails on errors and on warnings not overridden)"
	@echo "make test-package  the .deb and tarball in a fresh Debian 12 root (mmdebstrap; root, network)"
	@echo "make version    the version, from the release binary"

# The package list, for scripts (.ci/run installs exactly this).
apt-packages:
	@echo $(APT_PACKAGES)

# The first of the README's two commands: everything a fresh Debian 12 with Swift needs, then the
# demo (sign-in, get, usage, refresh, erase against the embedded test issuer, offline).
setup: deps tools demo
	@echo "setup: done. The binary is $(RELEASE_BIN); 'sudo make install' puts it on PATH, 'make test' runs the tests."

deps:
	@if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; \
	  echo "make deps: installing the Debian packages the build and tests need, with sudo apt-get:"; \
	  echo "  $(APT_PACKAGES)"; fi; \
	$$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends $(APT_PACKAGES)

# ChatMock from PyPI into $(TOOLS_VENV), for SinkChatMockTests (they are skipped, saying so, without it).
tools: $(TOOLS_VENV)/bin/chatmock

$(TOOLS_VENV)/bin/chatmock:
	python3 -m venv $(TOOLS_VENV)
	$(TOOLS_VENV)/bin/pip install --quiet --disable-pip-version-check chatmock==$(CHATMOCK_VERSION)

# SwiftPM lets a module import any module already built unless asked: with this, a module that
# imports one its Package.swift target does not list fails the build (ARCHITECTURE.md "Modules").
IMPORT_CHECK := --explicit-target-dependency-import-check error

build:
	$(SWIFT) build --build-tests $(IMPORT_CHECK)

release:
	@mkdir -p $(STATIC_LIB_DIR)/pkgconfig; a=$$($(CC) -print-file-name=libstdc++.a); \
	if [ -f "$$a" ]; then ln -sf "$$a" $(STATIC_LIB_DIR)/libstdc++.a; else rm -f $(STATIC_LIB_DIR)/libstdc++.a; fi; \
	s=$$(pkg-config --variable=libdir libsodium)/libsodium.a; \
	if [ -f "$$s" ]; then ln -sf "$$s" $(STATIC_LIB_DIR)/libsodium.a; \
	  printf 'libdir=%s\nName: libsodium\nDescription: libsodium, the static archive (see Makefile)\nVersion: %s\nLibs: -L$${libdir} -lsodium\nCflags: %s\n' \
	    "$(STATIC_LIB_DIR)" "$$(pkg-config --modversion libsodium)" "$$(pkg-config --cflags libsodium)" > $(STATIC_LIB_DIR)/pkgconfig/libsodium.pc; \
	else rm -f $(STATIC_LIB_DIR)/libsodium.a $(STATIC_LIB_DIR)/pkgconfig/libsodium.pc; fi
	$(SWIFT) build $(RELEASE_FLAGS) $(IMPORT_CHECK)

run: release
	@$(RELEASE_BIN) $(ARGS)

# The one test command (README and CI): unit and end-to-end tests against a real gnome-keyring,
# the real age and git binaries and the loopback test issuer.
test:
	scripts/with-keyring $(SWIFT) test $(IMPORT_CHECK) --skip LongLoad

# The long loads (suites whose type name starts with LongLoad: races over many rounds, broker load,
# make install and uninstall of a release build),
# kept out of `make test` so it stays fast; CI runs both.
test-load:
	scripts/with-keyring $(SWIFT) test $(IMPORT_CHECK) --filter LongLoad

test-unit:
	$(SWIFT) test --skip EndToEndTests --skip LongLoad $(IMPORT_CHECK)

lint-man:
	mandoc -Tlint -Wwarning man/chatgpt-credential.1 man/chatgpt-credential.7

# The completions and the man page's generated regions, from the verbs' registry (ccred-docs, a
# build tool that is not installed); DocsTests fails when the committed files differ from them.
docs:
	$(SWIFT) run $(IMPORT_CHECK) ccred-docs $(CURDIR)

bench: release
	scripts/with-keyring python3 bench/bench.py

bench-smoke: release
	scripts/with-keyring python3 bench/bench.py --smoke

demo: release
	scripts/demo.sh "$(RELEASE_BIN)"

# libFuzzer targets (fuzz/README.md), built by SwiftPM into .build/fuzz. Each target first replays
# its committed corpus, then fuzzes: FUZZ_SECONDS per target for `fuzz`, 10 s for `fuzz-smoke` (CI).
FUZZ_SECONDS ?= 60
fuzz:
	fuzz/run.sh $(FUZZ_SECONDS)

fuzz-smoke:
	fuzz/run.sh 10

install: release install-units
	install -d $(BINDIR) $(MANDIR) $(MAN7DIR) $(BASHCOMPDIR) $(ZSHCOMPDIR) $(FISHCOMPDIR)
	install -m 0755 $(RELEASE_BIN) $(BINDIR)/chatgpt-credential
	ln -sf chatgpt-credential $(BINDIR)/git-credential-chatgpt
	ln -sf chatgpt-credential $(BINDIR)/docker-credential-chatgpt
	install -m 0644 man/chatgpt-credential.1 $(MANDIR)/chatgpt-credential.1
	install -m 0644 man/chatgpt-credential.7 $(MAN7DIR)/chatgpt-credential.7
	ln -sf chatgpt-credential.1 $(MANDIR)/git-credential-chatgpt.1
	ln -sf chatgpt-credential.1 $(MANDIR)/docker-credential-chatgpt.1
	install -m 0644 completions/chatgpt-credential.bash $(BASHCOMPDIR)/chatgpt-credential
	install -m 0644 completions/_chatgpt-credential $(ZSHCOMPDIR)/_chatgpt-credential
	install -m 0644 completions/chatgpt-credential.fish $(FISHCOMPDIR)/chatgpt-credential.fish

# The systemd user units alone (no build): installed, never enabled (man page, KEEP AN IDLE SIGN-IN ALIVE).
install-units:
	install -d $(UNITDIR)
	@set -e; for u in $(UNITS); do \
	    if [ -f systemd/$$u.in ]; then \
	        sed 's|@BINDIR@|$(UNIT_BINDIR)|g' systemd/$$u.in > $(UNITDIR)/$$u.tmp; \
	        chmod 0644 $(UNITDIR)/$$u.tmp; mv -f $(UNITDIR)/$$u.tmp $(UNITDIR)/$$u; \
	    else \
	        install -m 0644 systemd/$$u $(UNITDIR)/$$u; \
	    fi; \
	done

uninstall:
	rm -f $(BINDIR)/chatgpt-credential $(BINDIR)/git-credential-chatgpt $(BINDIR)/docker-credential-chatgpt \
	      $(MANDIR)/chatgpt-credential.1 $(MANDIR)/git-credential-chatgpt.1 $(MANDIR)/docker-credential-chatgpt.1 $(MAN7DIR)/chatgpt-credential.7 \
	      $(BASHCOMPDIR)/chatgpt-credential $(ZSHCOMPDIR)/_chatgpt-credential \
	      $(FISHCOMPDIR)/chatgpt-credential.fish $(addprefix $(UNITDIR)/,$(UNITS))

# Packages (scripts/package says why dpkg-deb). Both are staged by `make install` into .build/stage,
# so the three ways to install put the same files in the same places (Debian's zsh directory for
# the .deb). VERSION comes from the release binary (`chatgpt-credential --version`, whose number
# lives in the code and nowhere else); ARCH from dpkg.
# (Computed on first use, once: RELEASE_BIN asks swift for its directory.)
VERSION = $(eval VERSION := $(shell $(RELEASE_BIN) --version 2>/dev/null | sed -n 's/^chatgpt-credential //p'))$(VERSION)
ARCH    = $(shell dpkg --print-architecture)
DIST    := $(CURDIR)/dist
STAGE   := $(CURDIR)/.build/stage
DEB      = $(DIST)/chatgpt-credential_$(VERSION)_$(ARCH).deb

version: release
	@echo $(VERSION)

deb: release
	@[ -n "$(VERSION)" ] || { echo "make deb: cannot read the version from $(RELEASE_BIN) --version" >&2; exit 1; }
	rm -rf $(STAGE)/deb
	@$(MAKE) --no-print-directory install PREFIX=/usr DESTDIR=$(STAGE)/deb \
	    ZSHCOMPDIR=$(STAGE)/deb/usr/share/zsh/vendor-completions >/dev/null
	scripts/package deb $(STAGE)/deb $(VERSION) $(ARCH) $(DIST)

dist: deb
	rm -rf $(STAGE)/tar
	@$(MAKE) --no-print-directory install PREFIX= DESTDIR=$(STAGE)/tar/chatgpt-credential-$(VERSION) \
	    USERUNITDIR=/share/systemd/user UNIT_BINDIR=%h/.local/bin >/dev/null
	scripts/package dist $(STAGE)/tar $(VERSION) $(ARCH) $(DIST)

lint-deb: deb
	lintian --pedantic --display-info --fail-on error,warning $(DEB)

# The .deb and the tarball in a fresh Debian 12 root (mmdebstrap; needs root and the Debian
# mirror): no Swift there, store/get with a refresh against the host's loopback test issuer.
test-package: dist lint-deb
	scripts/test-package $(DEB) $(DIST)/chatgpt-credential-$(VERSION)-linux-$(ARCH).tar.gz $(VERSION)

clean:
	rm -rf .build $(DIST)
