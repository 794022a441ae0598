/*
 * comm_oneshot.h -- one value combined across the ranks of a communicator without NCCL, where every rank
 * runs on the same host and its GPU reaches the others' memory (comm_oneshot.c, cuda/runtime/oneshot.cu):
 * each rank's mailbox opened by every other rank, and one kernel of one warp a call.
 *
 * comm.c decides with every rank whether the communicator takes this path: each rank offers a record
 * (whether it can, its host, its mailbox's handle), the records are gathered to every rank, each rank
 * opens the others' mailboxes, and the path is taken only where every rank could. So every rank combines
 * a value the same way, and gets the same bits: the values in rank order.
 */
#ifndef GR_COMM_ONESHOT_H
#define GR_COMM_ONESHOT_H

#include "core/handles.h"

typedef struct gr_oneshot gr_oneshot;

/* Bytes of a rank's record. */
#define GR_ONESHOT_RECORD_BYTES 192

/* This rank's offer, in its record (GR_ONESHOT_RECORD_BYTES at rec): *o, its mailbox, where it can take
 * part (at most GR_ONESHOT_RANKS ranks; GPUREDUCE_COMM_ONESHOT is not 0 and NCCL_P2P_DISABLE not
 * 1; a mailbox could be made), else NULL and a record that says it cannot. Never fails. */
void gr_oneshot_offer(gr_context *on, int rank, int size, gr_oneshot **o, void *rec);
/* Every rank's record (rank order, `size` of them) read: 1 where o opened the mailbox of every other
 * rank, all of them on o's host and able to take part; else 0. */
int gr_oneshot_join(gr_context *on, gr_oneshot *o, const void *recs, int size);
/* Closes the mailboxes o opened and frees its own (NULL: nothing), after the context's stream is done. */
void gr_oneshot_drop(gr_context *on, gr_oneshot *o);
/* The value at `value` (device memory) of dtype held, as one of dtype wire (gr_dev_oneshot_widens(held,
 * wire) must hold), combined by op across the ranks, queued on the context's stream; then, once the
 * stream is done, gr_oneshot_result. */
gr_status gr_oneshot_queue(gr_context *on, gr_oneshot *o, const void *value, gr_dtype held, gr_dtype wire,
                           gr_comm_op op, double timeout);
/* 1 with the combined word at out (8 bytes), or 0 where some rank's value did not come in time. */
int gr_oneshot_result(const gr_oneshot *o, void *out);

#endif
