#!/bin/sh
# man.sh BIN: the manual page gpumemsim(1) on stdout, made from the tool's
# own --help texts (the overview and every command's), so the page and the
# help can never disagree. `make install` puts it in share/man/man1/.
set -eu
bin=${1:?usage: scripts/man.sh BIN}
# roff: a backslash is \e; a line starting with . or ' needs \& before it
esc() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }
ver=$("$bin" --help | sed -n 's/^gpumemsim \([^:]*\):.*/\1/p' | head -1)
printf '.TH GPUMEMSIM 1 "" "gpumemsim %s" "User Commands"\n' "$ver"
printf '.SH NAME\ngpumemsim \\- trace-driven simulation of GPU memory behaviour\n'
printf '.SH SYNOPSIS\n.B gpumemsim\n.I command\n[options]\n'
printf '.SH DESCRIPTION\n.nf\n'
"$bin" --help | esc
printf '.fi\n.SH COMMANDS\n'
for c in $("$bin" --help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }'); do
	printf '.SS %s\n.nf\n' "$c"
	"$bin" "$c" --help | esc
	printf '.fi\n'
done
# subcommands with a --help of their own
printf '.SS whatif compile\n.nf\n'
"$bin" whatif compile --help | esc
printf '.fi\n'
printf '.SH EXIT STATUS\n0 success (a simulated out-of-memory is a result), 1 failure with a message\n'
printf 'naming the file and line or the knob, 2 usage error, 130 an interrupted sweep.\n'
printf '.SH SEE ALSO\nREADME.md and docs/ in the source tree.\n'
