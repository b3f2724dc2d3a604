/*
 * bcryptprimitives.dll for Wine 8.0, which lacks it: the Go runtime (1.24
 * and later) gets its random bytes from ProcessPrng and will not start
 * without it. This one hands the request to advapi32's RtlGenRandom
 * (SystemFunction036), which Wine has, in pieces RtlGenRandom's ULONG
 * length can take. Built by scripts/install-wine.sh with mingw-w64.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
	while (length > 0) {
		ULONG n = length > 0x40000000 ? 0x40000000 : (ULONG)length;
		if (!SystemFunction036(data, n))
			return FALSE;
		data += n;
		length -= n;
	}
	return TRUE;
}
