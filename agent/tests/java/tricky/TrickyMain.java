import java.util.function.IntUnaryOperator;

/**
 * Bytecode-rewriting corpus of the jtrace agent tests (agent/tests/rewrite.rs).
 * Every method counts its own invocations; main prints the counters
 * ("COUNT <Class.method> <n>") and, for methods left by an exception, how
 * often that happened ("EXC <Class.method> <n>"), so the test can compare
 * them with the trace. Usage: java TrickyMain <rounds>
 */
public class TrickyMain {
    static final int[] C = new int[64];
    static final String[] NAMES = new String[64];
    static final int[] X = new int[64];
    static int clinitRuns;

    static {
        clinitRuns++;
    }

    static int id(String name) {
        for (int i = 0; i < NAMES.length; i++) {
            if (NAMES[i] == null) { NAMES[i] = name; return i; }
            if (NAMES[i].equals(name)) { return i; }
        }
        throw new IllegalStateException();
    }

    static void count(String name) { C[id(name)]++; }
    static void exc(String name) { X[id(name)]++; }

    static int tableSwitch(int x) {
        count("TrickyMain.tableSwitch");
        int n = 0;
        switch (x % 50) {
            case 0: n = x * 3 + 0; if (n % 7 == 0) { return n; } break;
            case 1: n = x * 4 + 1; if (n % 7 == 0) { return n; } break;
            case 2: n = x * 5 + 2; if (n % 7 == 0) { return n; } break;
            case 3: n = x * 6 + 3; if (n % 7 == 0) { return n; } break;
            case 4: n = x * 7 + 4; if (n % 7 == 0) { return n; } break;
            case 5: n = x * 8 + 5; if (n % 7 == 0) { return n; } break;
            case 6: n = x * 9 + 6; if (n % 7 == 0) { return n; } break;
            case 7: n = x * 10 + 7; if (n % 7 == 0) { return n; } break;
            case 8: n = x * 11 + 8; if (n % 7 == 0) { return n; } break;
            case 9: n = x * 12 + 9; if (n % 7 == 0) { return n; } break;
            case 10: n = x * 13 + 10; if (n % 7 == 0) { return n; } break;
            case 11: n = x * 14 + 11; if (n % 7 == 0) { return n; } break;
            case 12: n = x * 15 + 12; if (n % 7 == 0) { return n; } break;
            case 13: n = x * 16 + 13; if (n % 7 == 0) { return n; } break;
            case 14: n = x * 17 + 14; if (n % 7 == 0) { return n; } break;
            case 15: n = x * 18 + 15; if (n % 7 == 0) { return n; } break;
            case 16: n = x * 19 + 16; if (n % 7 == 0) { return n; } break;
            case 17: n = x * 20 + 17; if (n % 7 == 0) { return n; } break;
            case 18: n = x * 21 + 18; if (n % 7 == 0) { return n; } break;
            case 19: n = x * 22 + 19; if (n % 7 == 0) { return n; } break;
            case 20: n = x * 23 + 20; if (n % 7 == 0) { return n; } break;
            case 21: n = x * 24 + 21; if (n % 7 == 0) { return n; } break;
            case 22: n = x * 25 + 22; if (n % 7 == 0) { return n; } break;
            case 23: n = x * 26 + 23; if (n % 7 == 0) { return n; } break;
            case 24: n = x * 27 + 24; if (n % 7 == 0) { return n; } break;
            case 25: n = x * 28 + 25; if (n % 7 == 0) { return n; } break;
            case 26: n = x * 29 + 26; if (n % 7 == 0) { return n; } break;
            case 27: n = x * 30 + 27; if (n % 7 == 0) { return n; } break;
            case 28: n = x * 31 + 28; if (n % 7 == 0) { return n; } break;
            case 29: n = x * 32 + 29; if (n % 7 == 0) { return n; } break;
            case 30: n = x * 33 + 30; if (n % 7 == 0) { return n; } break;
            case 31: n = x * 34 + 31; if (n % 7 == 0) { return n; } break;
            case 32: n = x * 35 + 32; if (n % 7 == 0) { return n; } break;
            case 33: n = x * 36 + 33; if (n % 7 == 0) { return n; } break;
            case 34: n = x * 37 + 34; if (n % 7 == 0) { return n; } break;
            case 35: n = x * 38 + 35; if (n % 7 == 0) { return n; } break;
            case 36: n = x * 39 + 36; if (n % 7 == 0) { return n; } break;
            case 37: n = x * 40 + 37; if (n % 7 == 0) { return n; } break;
            case 38: n = x * 41 + 38; if (n % 7 == 0) { return n; } break;
            case 39: n = x * 42 + 39; if (n % 7 == 0) { return n; } break;
            case 40: n = x * 43 + 40; if (n % 7 == 0) { return n; } break;
            case 41: n = x * 44 + 41; if (n % 7 == 0) { return n; } break;
            case 42: n = x * 45 + 42; if (n % 7 == 0) { return n; } break;
            case 43: n = x * 46 + 43; if (n % 7 == 0) { return n; } break;
            case 44: n = x * 47 + 44; if (n % 7 == 0) { return n; } break;
            case 45: n = x * 48 + 45; if (n % 7 == 0) { return n; } break;
            case 46: n = x * 49 + 46; if (n % 7 == 0) { return n; } break;
            case 47: n = x * 50 + 47; if (n % 7 == 0) { return n; } break;
            default: n = -x;
        }
        for (int i = 0; i < 3; i++) {
            if (n > 1000) { return n - i; }
            n += i;
        }
        return n;
    }

    static String lookupSwitch(int k) {
        count("TrickyMain.lookupSwitch");
        switch (k) {
            case 1: return "k1";
            case 17: return "k17";
            case 300: return "k300";
            case 4096: return "k4096";
            case 70000: return "k70000";
            case -5: return "k-5";
            case 123456789: return "k123456789";
            case 99: return "k99";
            case 1000000: return "k1000000";
            case 42: return "k42";
            case -77777: return "k-77777";
            case 8191: return "k8191";
            default: break;
        }
        if (k < 0) { return "neg"; }
        return "other";
    }

    static long fib(int n) {
        count("TrickyMain.fib");
        return n < 2 ? n : fib(n - 1) + fib(n - 2);
    }

    static double mix(long a, double b, int c, float d, long e) {
        count("TrickyMain.mix");
        if (c < 0) { return b; }
        return a * b + c + d + e;
    }

    static long longRet(long a) {
        count("TrickyMain.longRet");
        return a == 0 ? 0L : a * 3L;
    }

    static int manyLocals(int a) {
        count("TrickyMain.manyLocals");
        int v0 = a + 0;
        int v1 = a + 1;
        int v2 = a + 2;
        int v3 = a + 3;
        int v4 = a + 4;
        int v5 = a + 5;
        int v6 = a + 6;
        int v7 = a + 7;
        int v8 = a + 8;
        int v9 = a + 9;
        int v10 = a + 10;
        int v11 = a + 11;
        int v12 = a + 12;
        int v13 = a + 13;
        int v14 = a + 14;
        int v15 = a + 15;
        int v16 = a + 16;
        int v17 = a + 17;
        int v18 = a + 18;
        int v19 = a + 19;
        int v20 = a + 20;
        int v21 = a + 21;
        int v22 = a + 22;
        int v23 = a + 23;
        int v24 = a + 24;
        int v25 = a + 25;
        int v26 = a + 26;
        int v27 = a + 27;
        int v28 = a + 28;
        int v29 = a + 29;
        int v30 = a + 30;
        int v31 = a + 31;
        int v32 = a + 32;
        int v33 = a + 33;
        int v34 = a + 34;
        int v35 = a + 35;
        int v36 = a + 36;
        int v37 = a + 37;
        int v38 = a + 38;
        int v39 = a + 39;
        int v40 = a + 40;
        int v41 = a + 41;
        int v42 = a + 42;
        int v43 = a + 43;
        int v44 = a + 44;
        int v45 = a + 45;
        int v46 = a + 46;
        int v47 = a + 47;
        int v48 = a + 48;
        int v49 = a + 49;
        int v50 = a + 50;
        int v51 = a + 51;
        int v52 = a + 52;
        int v53 = a + 53;
        int v54 = a + 54;
        int v55 = a + 55;
        int v56 = a + 56;
        int v57 = a + 57;
        int v58 = a + 58;
        int v59 = a + 59;
        int v60 = a + 60;
        int v61 = a + 61;
        int v62 = a + 62;
        int v63 = a + 63;
        int v64 = a + 64;
        int v65 = a + 65;
        int v66 = a + 66;
        int v67 = a + 67;
        int v68 = a + 68;
        int v69 = a + 69;
        int v70 = a + 70;
        int v71 = a + 71;
        int v72 = a + 72;
        int v73 = a + 73;
        int v74 = a + 74;
        int v75 = a + 75;
        int v76 = a + 76;
        int v77 = a + 77;
        int v78 = a + 78;
        int v79 = a + 79;
        int v80 = a + 80;
        int v81 = a + 81;
        int v82 = a + 82;
        int v83 = a + 83;
        int v84 = a + 84;
        int v85 = a + 85;
        int v86 = a + 86;
        int v87 = a + 87;
        int v88 = a + 88;
        int v89 = a + 89;
        int v90 = a + 90;
        int v91 = a + 91;
        int v92 = a + 92;
        int v93 = a + 93;
        int v94 = a + 94;
        int v95 = a + 95;
        int v96 = a + 96;
        int v97 = a + 97;
        int v98 = a + 98;
        int v99 = a + 99;
        int v100 = a + 100;
        int v101 = a + 101;
        int v102 = a + 102;
        int v103 = a + 103;
        int v104 = a + 104;
        int v105 = a + 105;
        int v106 = a + 106;
        int v107 = a + 107;
        int v108 = a + 108;
        int v109 = a + 109;
        int v110 = a + 110;
        int v111 = a + 111;
        int v112 = a + 112;
        int v113 = a + 113;
        int v114 = a + 114;
        int v115 = a + 115;
        int v116 = a + 116;
        int v117 = a + 117;
        int v118 = a + 118;
        int v119 = a + 119;
        int v120 = a + 120;
        int v121 = a + 121;
        int v122 = a + 122;
        int v123 = a + 123;
        int v124 = a + 124;
        int v125 = a + 125;
        int v126 = a + 126;
        int v127 = a + 127;
        int v128 = a + 128;
        int v129 = a + 129;
        int v130 = a + 130;
        int v131 = a + 131;
        int v132 = a + 132;
        int v133 = a + 133;
        int v134 = a + 134;
        int v135 = a + 135;
        int v136 = a + 136;
        int v137 = a + 137;
        int v138 = a + 138;
        int v139 = a + 139;
        int v140 = a + 140;
        int v141 = a + 141;
        int v142 = a + 142;
        int v143 = a + 143;
        int v144 = a + 144;
        int v145 = a + 145;
        int v146 = a + 146;
        int v147 = a + 147;
        int v148 = a + 148;
        int v149 = a + 149;
        int v150 = a + 150;
        int v151 = a + 151;
        int v152 = a + 152;
        int v153 = a + 153;
        int v154 = a + 154;
        int v155 = a + 155;
        int v156 = a + 156;
        int v157 = a + 157;
        int v158 = a + 158;
        int v159 = a + 159;
        int v160 = a + 160;
        int v161 = a + 161;
        int v162 = a + 162;
        int v163 = a + 163;
        int v164 = a + 164;
        int v165 = a + 165;
        int v166 = a + 166;
        int v167 = a + 167;
        int v168 = a + 168;
        int v169 = a + 169;
        int v170 = a + 170;
        int v171 = a + 171;
        int v172 = a + 172;
        int v173 = a + 173;
        int v174 = a + 174;
        int v175 = a + 175;
        int v176 = a + 176;
        int v177 = a + 177;
        int v178 = a + 178;
        int v179 = a + 179;
        int v180 = a + 180;
        int v181 = a + 181;
        int v182 = a + 182;
        int v183 = a + 183;
        int v184 = a + 184;
        int v185 = a + 185;
        int v186 = a + 186;
        int v187 = a + 187;
        int v188 = a + 188;
        int v189 = a + 189;
        int v190 = a + 190;
        int v191 = a + 191;
        int v192 = a + 192;
        int v193 = a + 193;
        int v194 = a + 194;
        int v195 = a + 195;
        int v196 = a + 196;
        int v197 = a + 197;
        int v198 = a + 198;
        int v199 = a + 199;
        int v200 = a + 200;
        int v201 = a + 201;
        int v202 = a + 202;
        int v203 = a + 203;
        int v204 = a + 204;
        int v205 = a + 205;
        int v206 = a + 206;
        int v207 = a + 207;
        int v208 = a + 208;
        int v209 = a + 209;
        int v210 = a + 210;
        int v211 = a + 211;
        int v212 = a + 212;
        int v213 = a + 213;
        int v214 = a + 214;
        int v215 = a + 215;
        int v216 = a + 216;
        int v217 = a + 217;
        int v218 = a + 218;
        int v219 = a + 219;
        int v220 = a + 220;
        int v221 = a + 221;
        int v222 = a + 222;
        int v223 = a + 223;
        int v224 = a + 224;
        int v225 = a + 225;
        int v226 = a + 226;
        int v227 = a + 227;
        int v228 = a + 228;
        int v229 = a + 229;
        int v230 = a + 230;
        int v231 = a + 231;
        int v232 = a + 232;
        int v233 = a + 233;
        int v234 = a + 234;
        int v235 = a + 235;
        int v236 = a + 236;
        int v237 = a + 237;
        int v238 = a + 238;
        int v239 = a + 239;
        int v240 = a + 240;
        int v241 = a + 241;
        int v242 = a + 242;
        int v243 = a + 243;
        int v244 = a + 244;
        int v245 = a + 245;
        int v246 = a + 246;
        int v247 = a + 247;
        int v248 = a + 248;
        int v249 = a + 249;
        int v250 = a + 250;
        int v251 = a + 251;
        int v252 = a + 252;
        int v253 = a + 253;
        int v254 = a + 254;
        int v255 = a + 255;
        int v256 = a + 256;
        int v257 = a + 257;
        int v258 = a + 258;
        int v259 = a + 259;
        int v260 = a + 260;
        int v261 = a + 261;
        int v262 = a + 262;
        int v263 = a + 263;
        int v264 = a + 264;
        int v265 = a + 265;
        int v266 = a + 266;
        int v267 = a + 267;
        int v268 = a + 268;
        int v269 = a + 269;
        int v270 = a + 270;
        int v271 = a + 271;
        int v272 = a + 272;
        int v273 = a + 273;
        int v274 = a + 274;
        int v275 = a + 275;
        int v276 = a + 276;
        int v277 = a + 277;
        int v278 = a + 278;
        int v279 = a + 279;
        int v280 = a + 280;
        int v281 = a + 281;
        int v282 = a + 282;
        int v283 = a + 283;
        int v284 = a + 284;
        int v285 = a + 285;
        int v286 = a + 286;
        int v287 = a + 287;
        int v288 = a + 288;
        int v289 = a + 289;
        int v290 = a + 290;
        int v291 = a + 291;
        int v292 = a + 292;
        int v293 = a + 293;
        int v294 = a + 294;
        int v295 = a + 295;
        int v296 = a + 296;
        int v297 = a + 297;
        int v298 = a + 298;
        int v299 = a + 299;
        int s = v0 + v7 + v14 + v21 + v28 + v35 + v42 + v49 + v56 + v63 + v70 + v77 + v84 + v91 + v98 + v105 + v112 + v119 + v126 + v133 + v140 + v147 + v154 + v161 + v168 + v175 + v182 + v189 + v196 + v203 + v210 + v217 + v224 + v231 + v238 + v245 + v252 + v259 + v266 + v273 + v280 + v287 + v294;
        for (int i = 0; i < 3; i++) { v299 += i; }
        return s + v299;
    }

    static void thrower(int i) {
        count("TrickyMain.thrower");
        if (i >= 0) {
            exc("TrickyMain.thrower");
            throw new IllegalArgumentException("t" + i);
        }
    }

    static int catcher(int i) {
        count("TrickyMain.catcher");
        try {
            thrower(i);
            return 0;
        } catch (IllegalArgumentException e) {
            return 1;
        }
    }

    static int tryFinally(int x) {
        count("TrickyMain.tryFinally");
        int r = 0;
        try {
            if (x % 3 == 0) {
                exc("TrickyMain.tryFinally");
                throw new RuntimeException("tf");
            }
            if (x % 3 == 1) { return x; }
            r = x * 2;
        } finally {
            r++;
            C[63]++;
        }
        return r;
    }

    static int caughtInside(int x) {
        count("TrickyMain.caughtInside");
        try {
            if (x % 2 == 0) { throw new IllegalStateException("in"); }
            return x;
        } catch (IllegalStateException e) {
            return -x;
        }
    }

    int field;

    synchronized int syncMethod(int x) {
        count("TrickyMain.syncMethod");
        field += x;
        if (x % 5 == 0) {
            exc("TrickyMain.syncMethod");
            throw new ArithmeticException("sync");
        }
        return field;
    }

    static synchronized int staticSync(int x) {
        count("TrickyMain.staticSync");
        return x + 1;
    }

    int syncBlock(Object lock, int x) {
        count("TrickyMain.syncBlock");
        synchronized (lock) {
            if (x % 4 == 0) {
                exc("TrickyMain.syncBlock");
                throw new UnsupportedOperationException("block");
            }
            field -= x;
        }
        return field;
    }

    static int lambdas(int x) {
        count("TrickyMain.lambdas");
        IntUnaryOperator f = v -> {
            count("TrickyMain.lambda");
            return v * 3;
        };
        Runnable r = () -> count("TrickyMain.lambda");
        r.run();
        return f.applyAsInt(x);
    }

    public static void main(String[] args) {
        int rounds = Integer.parseInt(args[0]);
        count("TrickyMain.main");
        long sum = 0;
        TrickyMain t = new TrickyMain();
        Object lock = new Object();
        for (int i = 0; i < rounds; i++) {
            sum += tableSwitch(i);
            sum += lookupSwitch(i % 3 == 0 ? 4096 : i).length();
            sum += (long) mix(i, 0.5, i % 4 - 1, 1.5f, 7L);
            sum += longRet(i);
            sum += manyLocals(i);
            sum += catcher(i % 2 == 0 ? i : -1);
            try { sum += tryFinally(i); } catch (RuntimeException e) { sum -= 1; }
            sum += caughtInside(i);
            try { sum += t.syncMethod(i); } catch (ArithmeticException e) { sum -= 2; }
            sum += staticSync(i);
            try { sum += t.syncBlock(lock, i); } catch (UnsupportedOperationException e) { sum -= 3; }
            sum += lambdas(i);
            sum += TrickyObjects.run(i);
            sum += new TrickyObjects.Impl().twice(i);
        }
        sum += fib(15);
        sum += TrickyOld.run(rounds);
        System.out.println("SUM " + sum + " clinit=" + clinitRuns + " finally=" + C[63]);
        for (int i = 0; i < NAMES.length && NAMES[i] != null; i++) {
            if (C[i] > 0) { System.out.println("COUNT " + NAMES[i] + " " + C[i]); }
            if (X[i] > 0) { System.out.println("EXC " + NAMES[i] + " " + X[i]); }
        }
        System.out.println("COUNT TrickyMain.<clinit> " + clinitRuns);
    }
}
