#!/bin/bash
# Several rewards: reward.json's "reward" key is the score, the others are kept as details.
mkdir -p /logs/verifier
a=0; b=0
[ "$(cat /app/a.txt 2>/dev/null)" = "alpha" ] && a=1
[ "$(cat /app/b.txt 2>/dev/null)" = "beta" ] && b=1
echo "{\"reward\": $(( a * b )), \"a_correct\": $a, \"b_correct\": $b}" > /logs/verifier/reward.json
