# median_awk.sh: the median as awk functions, for the scripts that print
# tables of medians. Sourced, not run; Debian's mawk has no -i or -e, so the
# functions travel as a string put before each program:
#   . "$(dirname "$0")/median_awk.sh"
#   awk "$AWK_MEDIAN"'END { print med("3 1 2") }' /dev/null
# median(a, n): the median of a[1..n], compared as numbers and sorted in
#   place; the values themselves are returned as given (no reformatting);
#   "" when n is 0.
# med(list): the median of the numbers in a space-separated list.
# A program using them cannot have a variable named med or median.
AWK_MEDIAN='
function median(a, n,   i, j, x) {
	for (i = 2; i <= n; i++) {
		x = a[i]
		for (j = i - 1; j > 0 && a[j] + 0 > x + 0; j--) a[j + 1] = a[j]
		a[j + 1] = x
	}
	return !n ? "" : n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function med(list,   a, n) { n = split(list, a, " "); return median(a, n) }
'
