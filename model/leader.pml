/*
 * leader.pml: a Promela model of gapless's HA-leader protocol (DESIGN.md, "Leader election and the
 * fenced head log"), checked by model/check.sh in the test suite (CTest model_check). README.md
 * beside it has the results and the counterexamples.
 *
 * WHAT IS MODELLED
 *   N = 3 lock nodes (independent Redis servers). Each node holds `lock` (owner or none), `epoch`
 *   and a head log with at most one entry per height. Each script runs atomically on one node and
 *   checks everything before its first write:
 *     promote(c)             lock held -> LOCK_HELD; else lock := c, epoch++, reply epoch.
 *     renew(c, t)            lock != c -> NOT_OWNER; t < epoch -> STALE_EPOCH; else epoch := t.
 *     release(c)             lock == c -> lock := none.
 *     write_head(c, t, h, x) lock != c -> NOT_OWNER; t < epoch -> STALE_EPOCH; an entry at h: the
 *                            same hash -> EXISTS_SAME (a success, nothing written, no healing),
 *                            another hash -> CONFLICT; no entry: store (x, t), epoch := t (heal).
 *   NC candidates (2; -DNC=3 for three). FOLLOWER -> promote on every node; on a quorum of
 *   successful replies (Q = N/2+1 = 2) token := max of the epochs in the replies, then renew(c,
 *   token) on every node; on a quorum of renewals -> LEADER (only now is the token used). On any
 *   failure: release on every node -> FOLLOWER. A LEADER loops over: propose (write_head at ANY
 *   height with ANY hash, chosen nondeterministically: safety must come from the scripts, not from
 *   a well-behaved leader), lease renewal (renew on every node), graceful stepdown, and with
 *   -DREPAIR the repair pass (read a height on every node, re-propose the highest-epoch entry of a
 *   height held by fewer than Q of the nodes read). A round that misses its quorum makes the
 *   leader step down. The lock owner is the candidate's id, the same in all its terms.
 *
 *   Faults. Every request to every node may be lost, and every promote reply. A process may pause
 *   between any two node requests (each is one atomic step; all processes interleave), and the
 *   requests of a round go to the nodes in any order (-DFIXED_ORDER: node order only, a smaller
 *   state space). A lock may expire at any moment (TTLs give no safety), so a paused leader whose
 *   locks expired keeps acting on its stale token: a zombie.
 *
 * WHAT IS ABSTRACTED, AND THE REDUCTIONS (each keeps every reachable violation; README.md)
 *   - Time: no clocks, TTLs, validity windows or timeouts; expiry is a nondeterministic event.
 *   - Data loss of a node is NOT modelled: no restart without persistence, no failover to a stale
 *     replica, no eviction, no stream trimming. A node that forgets its epoch, lock or log breaks
 *     the quorum intersection that P1-P3 rest on (gapless requires noeviction and persistence).
 *   - No request is delayed in the network and executed after its sender gave up on it (a pause
 *     of the sender right before sending covers the delays the sender waits for).
 *   - Bounds: H heights (2; 1 for the 3-candidate run), 2 hash values, and at most MAXP promotion
 *     attempts in total (so every epoch and token <= MAXP), or with -DMAXE=e no new promotion once
 *     some node's epoch reached e; when they are used up the followers stay followers.
 *   - Lazy expiry: a lock expires right before a promote runs on its node, as part of that step.
 *     Only a promote can tell an expired lock from a held one (renew and write_head fail either
 *     way unless the lock is the sender's own, and then expiry only makes them fail, which is a
 *     lost request). P3's ghost predicate, the only other reader, sees more locks held, which
 *     makes P3 stricter.
 *   - Lost and failed requests take no step of their own: they change nothing outside the sender.
 *     A round is its sequence of successful requests; after any of them the sender may declare the
 *     rest lost, and a round whose remaining requests can no longer succeed ends by itself.
 *   - A lost renew or write_head reply only lowers the sender's success count, i.e. can only make
 *     it step down, which a leader may do at any time anyway; so their replies always arrive.
 *   - release: an executed release(c) does what an expiry of c's lock does, so the release round
 *     on stepdown is modelled as lost (lazy expiry covers the rest).
 *   - Symmetry: hash values at a height nobody wrote yet, the two heights while both are fresh,
 *     and idle candidates holding no lock are interchangeable; only one of each set of twins is
 *     explored.
 *   - Repair (-DREPAIR, off by default) only issues write_head calls, and the adversarial
 *     proposals already issue every write_head(h, x) a leader can, so it adds no reachable node
 *     state; the entry epochs are stored only with -DREPAIR (only repair reads them). The reads of
 *     one height are one step.
 *
 * PROPERTIES (assertions, checked in every reachable state: spin -a, pan -DSAFETY)
 *   P1 no fork: no height ever has two different hashes each stored on a majority of the nodes.
 *      History-based: accset[h][x] is the set of nodes that ever stored x at h, so an overwrite
 *      cannot hide an earlier majority.
 *   P2 at most one leader per epoch: each token reaches LEADER at most once over the whole run.
 *   P3 no zombie write lands: a write_head call with token t never collects a majority of
 *      acceptances (successful write_head scripts, EXISTS_SAME included) made while it is a
 *      zombie, that is while (a) some process has already reached LEADER with a token > t, or (b)
 *      some process whose promote round succeeded with a token > t holds the lock on a majority
 *      of the nodes (this covers the window between a new leader's promotion and its renew).
 *      -DP3_LITERAL checks the literal reading instead ("the write's majority-th acceptance is by
 *      the highest token any promote quorum returned so far"), which the protocol does NOT
 *      satisfy, harmlessly; see README.md.
 *   P1 and P3 count with the true majority MAJ = N/2+1 even when -DM3 breaks the protocol's quorum.
 *
 * MUTATIONS (each must make spin find a counterexample; check.sh checks which property fails)
 *   -DM1  write_head has no height check: it overwrites an existing entry.            (P1)
 *   -DM2  write_head and renew have no owner check (only the epoch check is left).    (P3, P2)
 *   -DM3  the quorum is N/2 instead of N/2+1 (for N = 3 that is quorum 1).             (P2)
 *   -DM4  the token is used right after the promote quorum, without the renew round.  (P2)
 *   -DONLY_P1 / -DONLY_P2 / -DONLY_P3 check one property only (all three by default);
 *   -DREACH_ZOMBIE / _TAKEOVER / _NONMONO: reachability checks, see below; -DTRACE: printf the
 *   steps (for spin -t replays of a counterexample).
 */

#define N 3
#ifndef NC
#define NC 2
#endif
#ifndef H
#define H 2           /* heights 0..H-1 (1 or 2) */
#endif
#define X 2           /* hash values 1..X (0 = no entry) */
#ifndef MAXP
#define MAXP 3        /* promotion attempts in total; bounds every epoch and token */
#endif

#define MAJ (N / 2 + 1)
#ifdef M3
#define Q (N / 2)
#else
#define Q (N / 2 + 1)
#endif

#if defined(ONLY_P1) || defined(ONLY_P2) || defined(ONLY_P3)
#ifdef ONLY_P1
#define CHECK_P1 1
#else
#define CHECK_P1 0
#endif
#ifdef ONLY_P2
#define CHECK_P2 1
#else
#define CHECK_P2 0
#endif
#ifdef ONLY_P3
#define CHECK_P3 1
#else
#define CHECK_P3 0
#endif
#else
#define CHECK_P1 1
#define CHECK_P2 1
#define CHECK_P3 1
#endif

/* ---- the lock nodes ---- */
byte lock[N];        /* 0 = none, else the owner's candidate id 1..NC */
byte epoch[N];
byte lg[N * H];      /* lg[n*H+h]: hash stored at height h on node n, 0 = none */
#ifdef REPAIR
byte lge[N * H];     /* the entry's epoch */
#endif

/* ---- the candidates' state that others' guards or P3 read (index 0 unused) ---- */
byte ph[NC + 1];     /* ph[c]: c's phase (FOLLOWER, ...) */
byte tok[NC + 1];    /* tok[c]: c's token once its promote round succeeded, 0 otherwise */
byte wh[NC + 1];     /* wh[c], wx[c]: the height and hash c is writing (0 when not writing) */
byte wx[NC + 1];

/* Scratch variables of one step (the node of the request, the script's result): every step is a
 * d_step that resets them, so they hold no state between steps and are not part of it. */
hidden byte n, r;

/* ---- bound and ghost state (never read by the protocol) ---- */
byte promotions;     /* promotion attempts so far */
byte accset[H * X];  /* accset[h*X+x-1]: bit n set once node n stored hash x at height h */
byte leadertoks;     /* bit t set once some process reached LEADER with token t */
byte maxleader;      /* highest token that reached LEADER so far */
#if defined(P3_LITERAL) || defined(REACH_NONMONO)
byte maxgrant;       /* highest token any promote quorum returned so far */
#define GRANTED maxgrant = (best > maxgrant -> best : maxgrant)
#else
#define GRANTED skip
#endif

#ifdef TRACE
#define MSC printf
#else
#define MSC(...) skip
#endif

#define CNT(m) (((m) & 1) + (((m) >> 1) & 1) + (((m) >> 2) & 1))
#define HOLDS(d) ((lock[0] == d) + (lock[1] == d) + (lock[2] == d))

#ifdef M2
#define OWNER(n, c) true
#else
#define OWNER(n, c) (lock[n] == c)
#endif

#ifdef REPAIR
#define REPAIR_EPOCH(n, hh, t) lge[n * H + hh] = t
#else
#define REPAIR_EPOCH(n, hh, t) skip
#endif

/* ---- the scripts: each runs inside one deterministic step of its caller; r := 1 on success.
 * Their checks are macros because a request step is only taken when its script succeeds (see
 * "failed requests" below). ---- */
#define RENEW_OK(n, c, t) (OWNER(n, c) && t >= epoch[n])
#ifdef M1
#define HEIGHT_OK(n, hh, xx) true
#else
#define HEIGHT_OK(n, hh, xx) (lg[n * H + hh] == 0 || lg[n * H + hh] == xx)
#endif
#define WRITE_OK(n, c, t, hh, xx) (OWNER(n, c) && t >= epoch[n] && HEIGHT_OK(n, hh, xx))

inline promote(n, c) {
  if
  :: lock[n] == 0 -> lock[n] = c; epoch[n]++; r = 1
  :: else -> r = 0                        /* LOCK_HELD */
  fi;
  MSC("MSC: c%d promote n%d -> %d (epoch %d)\n", c, n, r, epoch[n])
}

inline renew(n, c, t) {
  if
  :: RENEW_OK(n, c, t) -> epoch[n] = t; r = 1
  :: else -> r = 0                        /* NOT_OWNER or STALE_EPOCH */
  fi;
  MSC("MSC: c%d renew(%d) n%d -> %d\n", c, t, n, r)
}

inline write_head(n, c, t, hh, xx) {
  if
  :: WRITE_OK(n, c, t, hh, xx) && lg[n * H + hh] == xx ->
     r = 2                                /* EXISTS_SAME: a success, nothing written */
  :: WRITE_OK(n, c, t, hh, xx) && lg[n * H + hh] != xx ->
     r = 1;                               /* no entry (or -DM1: overwrite) */
     lg[n * H + hh] = xx;
     REPAIR_EPOCH(n, hh, t);
     epoch[n] = t;                        /* t >= epoch[n] here: healing is epoch := t */
     accset[hh * X + xx - 1] = accset[hh * X + xx - 1] | (1 << n);
     assert(!CHECK_P1 || CNT(accset[hh * X]) < MAJ || CNT(accset[hh * X + 1]) < MAJ)
  :: else -> r = 0                        /* NOT_OWNER, STALE_EPOCH or CONFLICT */
  fi;
  MSC("MSC: c%d write_head(t%d, h%d, x%d) n%d -> %d\n", c, t, hh, xx, n, r)
}

/* ---- the candidate ----
 * A loop of deterministic steps (d_step) selected by the candidate's phase ph[c]. A round sends
 * one request per node, one step each, so every other process interleaves between them. Every
 * nondeterministic choice (which node next, whether a promote reply arrives, whether the round
 * ends here with its remaining requests lost, which height and hash to propose) is a separate
 * alternative of the loop, so each step is one deterministic transition. The first step of a
 * round also makes the choice that starts it; the step that ends a round also evaluates it. */
#define FOLLOWER  0
#define PROMOTING 1
#define RENEWING  2   /* renew after promotion: a quorum -> LEADER */
#define LEADER    3
#define WRITING   4   /* write_head(tok, h, x) on every node */
#define LRENEW    5   /* the leader's lease renewal */

#define ALL ((1 << N) - 1)

/* Lost and failed requests. A lost request changes nothing outside its sender, so it needs no
 * step of its own: a round is the sequence of its executed requests, and after any of them the
 * sender may declare the remaining ones lost, which ends the round there. A request that fails
 * changes nothing either, and once renew or write_head fails on a node it fails there for the rest
 * of the round (a lock never returns to a sender that is not promoting, epochs only grow, entries
 * are never removed), so a failed renew or write_head is a lost one; a promote that finds the lock
 * held is lost too, and the lock expiring first is the alternative that lets it succeed. So every
 * request step below succeeds, and a round whose remaining requests would all fail ends by itself
 * (STUCK). This is the partial-order reduction of steps that touch nothing shared; see
 * model/README.md. `done` has bit k once node k's request was executed, or, with -DFIXED_ORDER,
 * once the round went past node k. */
#ifdef FIXED_ORDER
#define NEXT(k) ((done >> (k)) == 0)
#define MARK(k) done = (1 << ((k) + 1)) - 1
#define LAST(k) ((k) == N - 1)
#else
#define NEXT(k) ((done & (1 << (k))) == 0)
#define MARK(k) done = done | (1 << (k))
#define LAST(k) ((done | (1 << (k))) == ALL)
#endif
#define FINISHED (done == ALL)

/* Stepdown: release on every node (modelled as lost, see the top), back to FOLLOWER. */
#define STEPDOWN \
  MSC("MSC: c%d steps down\n", c); \
  ph[c] = FOLLOWER; tok[c] = 0; done = 0; ok = 0; best = 0; late = 0; wh[c] = 0; wx[c] = 0

/* P3: is a write_head with token t by c a zombie right now? */
#define NEWER(d, c, t) (c != d && tok[d] > t && HOLDS(d) >= MAJ)
#if NC >= 3
#define ZOMBIE(c, t) (maxleader > t || NEWER(1, c, t) || NEWER(2, c, t) || NEWER(3, c, t))
#else
#define ZOMBIE(c, t) (maxleader > t || NEWER(1, c, t) || NEWER(2, c, t))
#endif

#ifdef P3_LITERAL
#define ACCEPTED \
  late++; assert(!CHECK_P3 || late != MAJ || tok[c] >= maxgrant)
#else
#define ACCEPTED \
  if \
  :: ZOMBIE(c, tok[c]) -> late++; assert(!CHECK_P3 || late < MAJ); REACH(ZOMBIE, late > 0) \
  :: else -> skip \
  fi
#endif

/* Reachability checks (-DREACH_ZOMBIE etc.): each asserts that something P1-P3 need never
 * happens, so spin must find it, which shows that the checks above are not vacuous.
 *   ZOMBIE   a zombie write_head is accepted (P3's premise).
 *   TAKEOVER a second leader, with another token, commits a write.
 *   NONMONO  a promotion succeeds with a token no higher than one granted before (the diverged
 *            node epochs of DESIGN.md's "max-of-INCR is not monotonic" weak spot). */
#ifdef REACH_ZOMBIE
#define REACH_ZOMBIE_(cond) assert(!(cond))
#else
#define REACH_ZOMBIE_(cond) skip
#endif
#ifdef REACH_TAKEOVER
#define REACH_TAKEOVER_(cond) assert(!(cond))
#else
#define REACH_TAKEOVER_(cond) skip
#endif
#ifdef REACH_NONMONO
#define REACH_NONMONO_(cond) assert(!(cond))
#else
#define REACH_NONMONO_(cond) skip
#endif
#define REACH(what, cond) REACH_##what##_(cond)

/* ---- the end of a round ---- */
#define BECOME_LEADER \
  MSC("MSC: c%d LEADER, token %d\n", c, tok[c]); \
  assert(!CHECK_P2 || (leadertoks & (1 << tok[c])) == 0); \
  leadertoks = leadertoks | (1 << tok[c]); \
  maxleader = (tok[c] > maxleader -> tok[c] : maxleader); \
  ph[c] = LEADER

#ifdef M4
#define AFTER_PROMOTION BECOME_LEADER     /* -DM4: the token is used without the renew round */
#else
#define AFTER_PROMOTION ph[c] = RENEWING
#endif

#define PROMOTE_EVAL \
  if \
  :: ok >= Q -> \
     REACH(NONMONO, maxgrant > 0 && best <= maxgrant); \
     tok[c] = best; GRANTED; MSC("MSC: c%d promoted, token %d\n", c, best); \
     best = 0; done = 0; ok = 0; AFTER_PROMOTION \
  :: else -> STEPDOWN \
  fi

#define RENEW_EVAL \
  if \
  :: ok >= Q -> \
     done = 0; ok = 0; \
     if \
     :: ph[c] == RENEWING -> BECOME_LEADER \
     :: else -> ph[c] = LEADER \
     fi \
  :: else -> STEPDOWN \
  fi

#define WRITE_EVAL \
  if \
  :: ok >= Q -> \
     REACH(TAKEOVER, tok[c] == maxleader && leadertoks != (1 << tok[c])); \
     done = 0; ok = 0; late = 0; wh[c] = 0; wx[c] = 0; ph[c] = LEADER \
  :: else -> STEPDOWN \
  fi

/* ---- the executed requests to node k ----
 * promote (lazy expiry: a lock still held expires right before): the reply is lost (PN) or
 * arrives (PA); the token is the max over the replies that arrived. renew (RX) and write_head
 * (WX) succeed (see above); a lost reply would only lower ok, i.e. could only make the sender step
 * down, which it may do anyway, so their replies always arrive. */
#define PROMOTE_EXPIRING(k) n = k; if :: lock[n] != 0 -> lock[n] = 0 :: else -> skip fi; promote(n, c)
#define PN(k) PROMOTE_EXPIRING(k); r = 0; n = 0; MARK(k)
#define PA(k) PROMOTE_EXPIRING(k); ok++; best = (epoch[n] > best -> epoch[n] : best); r = 0; n = 0; MARK(k)
#define RX(k) n = k; renew(n, c, tok[c]); ok++; r = 0; n = 0; MARK(k)
#define WX(k) n = k; write_head(n, c, tok[c], wh[c], wx[c]); ACCEPTED; ok++; r = 0; n = 0; MARK(k)

/* Round starts. */
#ifdef MAXE
#define START_PROMOTE ph[c] = PROMOTING
#else
#define START_PROMOTE promotions++; ph[c] = PROMOTING
#endif
#define START_LRENEW ph[c] = LRENEW
#define START_WRITE(hh, xx) wh[c] = hh; wx[c] = xx; ph[c] = WRITING
#define NOSTART skip

/* Symmetry breaking (sound: it only removes steps; complete: each removed step has a symmetric
 * twin that is kept). Hash values at a height are interchangeable while no node has an entry
 * there and nobody is writing there, so the first proposal at a fresh height uses hash 1; the two
 * heights are interchangeable while both are fresh, so the first proposal goes to height 0. Two
 * candidates that are both idle followers holding no lock are interchangeable, so only the lowest
 * numbered of them may start a promotion. */
#define EMPTY(hh) (lg[hh] == 0 && lg[H + hh] == 0 && lg[2 * H + hh] == 0)
#define WRITES(d, hh) (ph[d] == WRITING && wh[d] == hh)
#define IDLE(d) (ph[d] == FOLLOWER && HOLDS(d) == 0)
#if NC >= 3
#define UNWRITTEN(hh) (!WRITES(1, hh) && !WRITES(2, hh) && !WRITES(3, hh))
#define LOWEST_IDLE(c) (c == 1 || (c == 2 && !IDLE(1)) || (c == 3 && !IDLE(1) && !IDLE(2)))
#else
#define UNWRITTEN(hh) (!WRITES(1, hh) && !WRITES(2, hh))
#define LOWEST_IDLE(c) (c == 1 || !IDLE(1))
#endif
#define FRESH(hh) (EMPTY(hh) && UNWRITTEN(hh))
#ifdef NO_SYMMETRY
#define SYM_HX(hh, xx) true
#undef LOWEST_IDLE
#define LOWEST_IDLE(c) true
#else
#define SYM_HX(hh, xx) ((xx == 1 || !FRESH(hh)) && (hh == 0 || !FRESH(0) || !FRESH(hh)))
#endif

/* Guards: the phase, node k still to do, and (renew, write_head) the script would succeed. */
#define P_ON(k) (ph[c] == PROMOTING && NEXT(k))
#ifdef MAXE
#define MAY_PROMOTE (epoch[0] < MAXE && epoch[1] < MAXE && epoch[2] < MAXE)
#else
#define MAY_PROMOTE (promotions < MAXP)
#endif
#define P_GO(k) (ph[c] == FOLLOWER && MAY_PROMOTE && (!IDLE(c) || LOWEST_IDLE(c)))
#define R_ON(k) ((ph[c] == RENEWING || ph[c] == LRENEW) && NEXT(k) && RENEW_OK(k, c, tok[c]))
#define R_GO(k) (ph[c] == LEADER && !NO_LRENEW && RENEW_OK(k, c, tok[c]))
#define W_ON(k) (ph[c] == WRITING && NEXT(k) && WRITE_OK(k, c, tok[c], wh[c], wx[c]))
#define W_GO_HX(k, hh, xx) \
  (ph[c] == LEADER && hh < H && SYM_HX(hh, xx) && WRITE_OK(k, c, tok[c], hh, xx))

/* One executed request: guard, round start, the request, and the end of the round: when every
 * node had its request, or now (the remaining requests are lost). */
#define REQ(k, guard, start, REQUEST, EVAL) \
  :: d_step { guard -> start; REQUEST; if :: FINISHED -> EVAL :: else -> skip fi } \
  :: d_step { guard && !LAST(k) -> start; REQUEST; EVAL }

#define NODE_STEPS(k) \
  REQ(k, P_ON(k), NOSTART, PN(k), PROMOTE_EVAL) \
  REQ(k, P_ON(k), NOSTART, PA(k), PROMOTE_EVAL) \
  REQ(k, P_GO(k), START_PROMOTE, PN(k), PROMOTE_EVAL) \
  REQ(k, P_GO(k), START_PROMOTE, PA(k), PROMOTE_EVAL) \
  REQ(k, R_ON(k), NOSTART, RX(k), RENEW_EVAL) \
  REQ(k, R_GO(k), START_LRENEW, RX(k), RENEW_EVAL) \
  REQ(k, W_ON(k), NOSTART, WX(k), WRITE_EVAL) \
  REQ(k, W_GO_HX(k, 0, 1), START_WRITE(0, 1), WX(k), WRITE_EVAL) \
  REQ(k, W_GO_HX(k, 0, 2), START_WRITE(0, 2), WX(k), WRITE_EVAL) \
  REQ(k, W_GO_HX(k, 1, 1), START_WRITE(1, 1), WX(k), WRITE_EVAL) \
  REQ(k, W_GO_HX(k, 1, 2), START_WRITE(1, 2), WX(k), WRITE_EVAL)

/* A renew or write round none of whose remaining requests can succeed any more, and the renew
 * round after a promotion (and the write round of a repair), which start with no request sent,
 * with all their requests lost. */
#define CAN_R(k) (NEXT(k) && RENEW_OK(k, c, tok[c]))
#define CAN_W(k) (NEXT(k) && WRITE_OK(k, c, tok[c], wh[c], wx[c]))
#define STUCK \
  :: d_step { (ph[c] == RENEWING || ph[c] == LRENEW) && !CAN_R(0) && !CAN_R(1) && !CAN_R(2) -> \
       RENEW_EVAL } \
  :: d_step { ph[c] == WRITING && !CAN_W(0) && !CAN_W(1) && !CAN_W(2) -> WRITE_EVAL } \
  :: d_step { ph[c] == RENEWING && done == 0 -> RENEW_EVAL } \
  :: d_step { ph[c] == WRITING && done == 0 -> WRITE_EVAL }

#ifndef NO_LRENEW
#define NO_LRENEW 0
#endif

proctype Candidate(byte c) {
  byte best, ok, late, done;
#ifdef REPAIR
  byte reads, seen, re;
#endif

end_candidate:
  do
  NODE_STEPS(0)
  NODE_STEPS(1)
  NODE_STEPS(2)
  STUCK
  :: d_step { ph[c] == LEADER -> STEPDOWN }     /* graceful stepdown */
#ifdef REPAIR
  /* repair: read height h on every node (each read may be lost) and re-propose the highest-epoch
   * entry if fewer than Q of the nodes read hold the height. */
  :: atomic {
       ph[c] == LEADER ->
       if :: wh[c] = 0 :: wh[c] = H - 1 fi;
       for (n : 0 .. N - 1) {
         if
         :: skip
         :: reads++;
            if
            :: lg[n * H + wh[c]] != 0 ->
               seen++;
               if
               :: wx[c] == 0 || lge[n * H + wh[c]] > re -> wx[c] = lg[n * H + wh[c]]; re = lge[n * H + wh[c]]
               :: else -> skip
               fi
            :: else -> skip
            fi
         fi
       }
       n = 0;
       if
       :: reads < Q -> STEPDOWN
       :: reads >= Q && seen > 0 && seen < Q -> ph[c] = WRITING; done = 0
       :: else -> wh[c] = 0; wx[c] = 0
       fi;
       reads = 0; seen = 0; re = 0
     }
#endif
  od
}

init {
  byte i;
  atomic {
    for (i : 1 .. NC) {
      run Candidate(i)
    }
  }
}
