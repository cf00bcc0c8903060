// Package fairshare divides a capacity among demands, max-min fairly:
// the one division RLQS and async mode share.
//
// A division is max-min fair when no share can be raised without
// lowering one that is already no larger. It is found by water-filling
// (as Google's Doorman does): a demand below an equal share of what is
// left gets all it asks, and what it leaves is shared the same way among
// the others. It comes down to one water level: each demand's share is
// the least of the demand and the level. The level is +Inf when the
// capacity covers every demand.
//
// An infinite demand is a client whose demand is not measured: it takes
// an equal share of what the others leave. A negative or NaN demand
// counts as zero, and so does a negative or NaN capacity.
//
// Every division guarantees that
//
//   - the shares add up to at most the capacity (to a float's rounding);
//   - no share is above its demand, nor below zero;
//   - it is max-min fair: a share below its demand is the level, and no
//     share is above the level;
//   - the capacity is used up to the sum of the demands.
//
// A division of n demands costs a sort, O(n log n), and one pass over the
// sorted demands; Level allocates nothing.
package fairshare
