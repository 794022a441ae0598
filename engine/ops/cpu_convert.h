/*
 * cpu_convert.h -- conversions between dtypes on the host (cpu_convert.c): the side of b:astype and
 * gr.copy that reads host memory (the cpu backend's buffers, pinned host buffers). The device's side is
 * cuda/runtime/convert.cu; both expand the element macros of ops/convert_element.h, so they agree to the
 * bit.
 */
#ifndef GR_CPU_CONVERT_H
#define GR_CPU_CONVERT_H

#include "gr.h"

/* Converts n elements of dtype `from` at src into dtype `to` at dst, by mode (convert_element.h):
 * GR_CV_CHECK returns the index of the first element that does not fit (n when all do); with GR_CV_WRITE
 * too, the elements are written as they are checked, and the pass stops soon after the first that does
 * not fit (what it wrote of that part is garbage: for a fresh destination only). GR_CV_WRITE alone
 * converts everything unchecked (an element that does not fit keeps the low bits of IEEE's answer or of
 * the integer) and returns n. dst may be NULL for GR_CV_CHECK alone. */
size_t gr_cpu_convert(void *dst, gr_dtype to, const void *src, gr_dtype from, size_t n, int mode);

/* 1 when some value of dtype `from` does not fit dtype `to` (NaN into an integer, 65520 into float16,
 * -1 into uint8, ...), found by converting from's extremes (and for a float format its infinities and
 * NaN) with the same macros; 0 when every conversion succeeds, so that no pass needs to check. */
int gr_convert_can_fail(gr_dtype from, gr_dtype to);

#endif
