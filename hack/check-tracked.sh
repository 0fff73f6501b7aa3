#!/usr/bin/env bash
# Fails when a tracked file is a build output: a compiled executable or
# object (ELF, Mach-O, PE, archive), or any file over 1 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=0
while IFS= read -r -d '' f; do
	[ -f "$f" ] && [ ! -L "$f" ] || continue
	size=$(stat -c %s "$f")
	if [ "$size" -gt 1048576 ]; then
		echo "tracked file over 1 MiB: $f ($size bytes)"
		bad=1
		continue
	fi
	# ELF, Mach-O (both byte orders, 32 and 64 bit), PE, ar archives.
	case "$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')" in
	7f454c46* | cffaedfe* | cefaedfe* | feedface* | feedfacf* | 4d5a* | 213c617263683e0a)
		echo "tracked build output: $f"
		bad=1
		;;
	esac
done < <(git ls-files -z)
exit $bad
