# shellcheck shell=bash
# apt_sources.sh -- where this machine's apt reaches Debian: the archive and
# security URIs of its own apt sources, read, never changed.  Sourced by
# debsrc.sh and fresh_check.sh; defines functions only.

# Debian's release names and classes: an entry whose suite is one of them
# (or NAME-updates, NAME-security, NAME/updates, NAME-backports) is Debian's;
# any other (a vendor's repository) is ignored.
SSLR_DEBIAN_SUITES='buster bullseye bookworm trixie forky duke sid experimental
oldoldstable oldstable stable testing unstable'

# sslr_apt_source_entries: one line "URI SUITE" per enabled deb or deb-src
# entry of the system's apt sources, in both formats: one-line entries in
# the sources.list file and sourceparts/*.list, deb822 stanzas in
# sourceparts/*.sources (each URI with each suite).  The paths are apt's own
# (apt-config), so a machine that moved them is read where they are.
sslr_apt_source_entries() {
    local SL='' SP='' f
    eval "$(apt-config shell SL Dir::Etc::sourcelist/f SP Dir::Etc::sourceparts/d)"
    for f in "$SL" "${SP%/}"/*.list; do
        [ -f "$f" ] || continue
        # deb [options] URI SUITE COMPONENT...; options may hold spaces
        sed -E 's/#.*//; s/\[[^]]*\]//' "$f" |
            awk '($1 == "deb" || $1 == "deb-src") && NF >= 3 { print $2, $3 }'
    done
    for f in "${SP%/}"/*.sources; do
        [ -f "$f" ] || continue
        awk '
            function flush(   i, j, nu, ns, u, s) {
                if (types ~ /(^| )deb(-src)?( |$)/ && enabled !~ /^(no|false|0)$/) {
                    nu = split(uris, u, " "); ns = split(suites, s, " ")
                    for (i = 1; i <= nu; i++)
                        for (j = 1; j <= ns; j++)
                            print u[i], s[j]
                }
                types = uris = suites = enabled = ""; field = ""
            }
            /^[[:space:]]*#/ { next }
            /^[[:space:]]*$/ { flush(); next }
            /^[A-Za-z-]+:/ {
                field = tolower($1); sub(/:$/, "", field)
                value = $0; sub(/^[^:]*:[[:space:]]*/, "", value)
            }
            /^[[:space:]]/ { value = $0 }     # a continuation line
            {
                if (field == "types") types = types " " value
                else if (field == "uris") uris = uris " " value
                else if (field == "suites") suites = suites " " value
                else if (field == "enabled") enabled = value
            }
            END { flush() }
        ' "$f"
    done
}

# sslr_debian_uris: sets SSLR_ARCHIVE_URI and SSLR_SECURITY_URI from the
# system's Debian entries (the first of each kind; the security one may be
# empty), or fails saying that no archive was found.  A mirror or proxy
# named there is used as it is.
sslr_debian_uris() {
    local uri suite base known=" ${SSLR_DEBIAN_SUITES//$'\n'/ } "
    SSLR_ARCHIVE_URI=
    SSLR_SECURITY_URI=
    while read -r uri suite; do
        base=${suite%%[-/]*}
        [[ "$known" == *" $base "* ]] || continue
        uri=${uri%/}
        case "$suite" in
            *-security | */updates) : "${SSLR_SECURITY_URI:=$uri}" ;;
            *) : "${SSLR_ARCHIVE_URI:=$uri}" ;;
        esac
    done < <(sslr_apt_source_entries)
    if [ -z "$SSLR_ARCHIVE_URI" ]; then
        echo "no Debian archive found in this machine's apt sources" \
            "(apt-config's Dir::Etc::sourcelist and sourceparts): add the archive or mirror you use there" >&2
        return 1
    fi
    [ -n "$SSLR_SECURITY_URI" ] ||
        printf '==> no Debian security suite in the apt sources: the -security suites are skipped\n' >&2
}
