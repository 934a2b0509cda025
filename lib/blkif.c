/* SPDX-License-Identifier: MIT */
/* lib/blkif.c: ABI names and ring geometry.  See blkif.h. */
#include <errno.h>
#include <string.h>

#include <xen/io/protocols.h>

#include "blkif.h"

int xbd_blkif_abi_parse(const char *protocol, enum xbd_blkif_abi *out)
{
	if (!protocol || !strcmp(protocol, XEN_IO_PROTO_ABI_X86_64) ||
	    !strcmp(protocol, XEN_IO_PROTO_ABI_ARM)) {
		*out = XBD_BLKIF_ABI_X86_64;
		return 0;
	}
	if (!strcmp(protocol, XEN_IO_PROTO_ABI_X86_32)) {
		*out = XBD_BLKIF_ABI_X86_32;
		return 0;
	}
	return -EINVAL;
}

const char *xbd_blkif_abi_protocol(enum xbd_blkif_abi abi)
{
	return abi == XBD_BLKIF_ABI_X86_32 ? XEN_IO_PROTO_ABI_X86_32
					   : XEN_IO_PROTO_ABI_X86_64;
}

unsigned int xbd_blkif_ring_entries(enum xbd_blkif_abi abi, unsigned int order)
{
	size_t fit;
	unsigned int n;

	if (order > XBD_BLKIF_MAX_RING_ORDER)
		return 0;
	fit = ((size_t)XBD_BLKIF_PAGE_SIZE << order) - XBD_BLKIF_SRING_HDR_SIZE;
	n = (unsigned int)(fit / xbd_blkif_entry_size(abi));
	while (n & (n - 1))             /* round down to a power of two */
		n &= n - 1;
	return n;
}
