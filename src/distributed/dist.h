/** @file
 * Data-parallel training over MPI (optional: make MPI=1, Debian's Open MPI).
 *
 * N copies of the program (mpirun -np N), one per rank, each hold the whole
 * model. Every step each rank computes the gradients of its own shard of
 * the global batch; the gradients are then averaged over the ranks
 * (MPI_Allreduce), so every rank takes the same optimizer step and the
 * replicas stay identical, as PyTorch's DistributedDataParallel does:
 *
 *     tg_dist_init(&argc, &argv);                        // once, before anything else
 *     tg_dist_broadcast_params(&params);                 // everyone starts from rank 0's weights
 *     tg_dist_grads *g = tg_dist_grads_new(&params, 0);  // the buckets (default size)
 *     for each step:
 *         tg_token_data_batch_shard(d, B, T, tg_dist_rank(), tg_dist_size(), x, y);
 *         tg_optim_zero_grad(opt);
 *         tg_dist_grads_arm(g);                          // the next backward starts the reduction
 *         tg_backward(loss_of_the_shard);                //   bucket by bucket, as gradients get final
 *         tg_dist_allreduce_grads(g);                    // waits for the rest, divides by N
 *         tg_optim_step(opt);
 *     tg_dist_grads_free(g);
 *     tg_dist_finalize();
 *
 * Buckets. The gradients are packed into buckets of about bucket_bytes, in
 * the reverse order of the parameter list (the order backward finishes
 * them), the same layout on every rank. During an armed backward the
 * autograd's gradient-ready hook (tg_set_grad_ready_hook) reports each
 * parameter whose gradient is final; once every parameter of a bucket is,
 * the bucket is copied out and its MPI_Iallreduce started, while backward
 * goes on computing the earlier layers' gradients. Buckets start strictly in
 * bucket order, so every rank issues the same collectives in the same order.
 *
 * Order of the sum. MPI_SUM adds floats; x + y is commutative in IEEE
 * arithmetic, so with 2 ranks every rank gets the same bits, and for any N
 * Open MPI's schedules (recursive doubling, ring, ...) compute each element
 * once and send it to the others, depending only on (N, message size),
 * which the fixed bucket layout fixes: a run is reproducible for a given N.
 * Scalars reduced with tg_dist_allreduce_sum (losses) are gathered and
 * added in rank order instead. The average equals single-process training
 * on the same global batch in exact arithmetic; in floating point it
 * differs by rounding (the batch's sum is split in two).
 *
 * Failures. Every collective is nonblocking, polled with MPI_Test until a
 * deadline (TG_DIST_TIMEOUT_S seconds, default 60): when a rank has died
 * or hangs, the others' collectives return -1 with "tgrad dist: rank R:
 * <collective> did not complete within S s (a rank may have died)"
 * recorded, and the program should print it and call tg_dist_abort (an MPI
 * program cannot leave a failed collective otherwise). The communicator's
 * error handler is MPI_ERRORS_RETURN, so MPI errors come back the same way.
 * The one exception is tg_dist_barrier on ranks other than 0: it ends rank
 * 0's single-rank work (saving, sampling), which may take any time, so
 * they wait there without the deadline, watching that their peers live.
 *
 *     if (tg_dist_rank() == 0) save_checkpoints_and_sample();
 *     tg_dist_barrier();                                 // the others wait for it, however long
 *
 * Built without MPI=1, the functions are single-process stubs: rank 0 of 1,
 * the reductions and broadcasts change nothing, and tg_dist_init fails
 * ("built without MPI=1"), so a program compiles one way and says why
 * --ddp cannot run. Nothing from MPI is included or linked then. */
#ifndef TG_DIST_H
#define TG_DIST_H

#include <stddef.h>
#include "../tensor/params.h"

/** True when this library was built with MPI=1. */
bool tg_dist_available(void);
/** MPI_Init (argc, argv may be NULL), then the run's communicator, the
 * peers' pids and this rank's dropout shard. Reads TG_DIST_TIMEOUT_S.
 * Returns 0, or -1 with the error recorded (always so without MPI=1; also
 * when MPI is initialised already). Call once. */
int tg_dist_init(int *argc, char ***argv);
/** True between a successful tg_dist_init and tg_dist_finalize. */
bool tg_dist_active(void);
int tg_dist_rank(void); /**< this process's rank, 0..size-1; 0 when not active */
int tg_dist_size(void); /**< the number of ranks; 1 when not active */
/** Waits for every rank: the end of a single-rank phase, where rank 0 alone
 * writes files, samples or evaluates while the others wait here. Such work
 * may take any time (a large checkpoint on a slow disk), so only rank 0,
 * which arrives last, waits under the collectives' deadline (for ranks that
 * are there already, unless one died or hangs). The others wait without a
 * deadline, which a long save would pass and so kill a healthy run, but not
 * blindly: every 0.2 s they check that the ranks on their host (and pid
 * namespace; pids gathered by tg_dist_init) still live, by kill(pid, 0) and
 * /proc (a zombie is dead), and fail with "tgrad dist: rank R: barrier:
 * rank P (pid N) died while this rank waited for it" when one is gone. A
 * rank that dies on another host is mpirun's to notice: it ends the job
 * when a rank exits without MPI_Finalize (the others then die with it).
 * Why not a deadline that rank 0 suspends for a declared long phase
 * (heartbeats, a "busy" message): inside a save rank 0 makes no MPI calls,
 * so it could show that it lives only from a second thread
 * (MPI_THREAD_MULTIPLE), and a rank 0 stuck in its save, alive, would be
 * undetectable either way; while the others wait in a barrier, checking
 * the process itself is what tells a slow rank 0 from a dead one. So
 * single-rank work belongs to rank 0, followed by a barrier on every rank.
 * Test hooks, compiled only into test builds (the installed library ignores
 * them): TG_DIST_SLOW_LEAD_S=S makes rank 0 sleep S s on entering a barrier
 * (a long save), TG_DIST_FAULT=R:barrier:exit|hang makes rank R exit or
 * hang there. 0, or -1 with the error recorded. */
int tg_dist_barrier(void);
/** Copies every tensor of p from rank 0 to the others (the same list on
 * every rank: same names, same shapes; a different count of tensors or
 * elements is an error). Not active: nothing changes. 0, or -1 with the
 * error recorded. */
int tg_dist_broadcast_params(const tg_params *p);
/** v[i] = sum over ranks of v[i] for i in [0, n), added in rank order (0, 1,
 * ..., N-1), so every rank gets the same bits. For losses and counters, not
 * gradients. Not active: nothing changes. 0, or -1 with the error recorded. */
int tg_dist_allreduce_sum(double *v, int n);
/** Frees the run's communicator and calls MPI_Finalize; afterwards this is
 * rank 0 of 1 again. Returns 0 (also when not active). */
int tg_dist_finalize(void);
/** Ends every rank of the run with exit code code (MPI_Abort); exit(code)
 * when not active. For after a failed collective. */
void tg_dist_abort(int code);

/* ---- gradient averaging ------------------------------------------------------- */
/** The gradient buckets of one parameter list (opaque): made by
 * tg_dist_grads_new, freed by tg_dist_grads_free. */
typedef struct tg_dist_grads tg_dist_grads;
#define TG_DIST_BUCKET_BYTES ((size_t)4 << 20) /**< 4 MiB, the default (bucket_bytes 0) */
/** The bucket layout for the parameter list p (which must outlive it): a
 * parameter is never split, a bucket is closed once it holds bucket_bytes
 * or more (bucket_bytes 0: TG_DIST_BUCKET_BYTES). The same in both builds.
 * NULL with the error recorded on bad input (NULL or empty list, a NULL
 * tensor, a bucket past 2^31 - 1 values) or out of memory. */
tg_dist_grads *tg_dist_grads_new(const tg_params *p, size_t bucket_bytes);
int tg_dist_grads_buckets(const tg_dist_grads *g); /**< the number of buckets (0 for NULL) */
/** The next tg_backward starts each bucket's reduction as soon as its
 * gradients are final. Call just before the last backward of a step (after
 * the other micro-batches' when accumulating). Without it (or with
 * TG_DIST_NO_OVERLAP=1 in the environment) tg_dist_allreduce_grads does the
 * whole reduction itself, after backward. Not active, or one rank: nothing
 * to do. 0, or -1 with the error recorded. */
int tg_dist_grads_arm(tg_dist_grads *g);
/** Averages every parameter's gradient over the ranks: starts the buckets
 * not started yet, waits for all, divides by N and writes the averages back
 * into the .grad tensors (a parameter without one gets one). Not active:
 * nothing changes. 0, or -1 with the error recorded. */
int tg_dist_allreduce_grads(tg_dist_grads *g);
/** Counters of a tg_dist_grads since it was made (tg_dist_grads_stats). */
typedef struct {
    long calls;         /**< tg_dist_allreduce_grads calls */
    double bytes;       /**< gradient bytes reduced per call */
    double wait_s;      /**< total time blocked in tg_dist_allreduce_grads */
    long buckets_early; /**< buckets started during a backward, over all calls */
    long buckets_late;  /**< buckets started by tg_dist_allreduce_grads itself */
} tg_dist_stats;
/** g's counters (all zero for NULL). To measure the overlap, compare wait_s
 * with tg_dist_grads_arm against wait_s with TG_DIST_NO_OVERLAP=1 (the
 * whole reduction after backward). */
tg_dist_stats tg_dist_grads_stats(const tg_dist_grads *g);
void tg_dist_grads_free(tg_dist_grads *g); /**< Frees g (and removes its hook if armed); NULL is a no-op. */

#endif
